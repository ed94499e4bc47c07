"""A worker hands its verdict back even when Redis is away for a while, and gives up in time."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest

from kplay.kernels.models import RunJob, RunResult, RunState
from kplay.workers.celery_app import WorkerConfig
from kplay.workers.tasks import Runtime
from tests.workers.celery_support import (  # noqa: F401 - fixtures
    RESULT_KEY,
    RedisServer,
    free_port,
    job,
    redis_base_fixture,
)

pytestmark = pytest.mark.redis


def _runtime(url: str, publish_retry_s: float) -> Runtime:
    config = WorkerConfig(
        broker_url=url,
        key_prefix=f"kplaytest-{uuid.uuid4().hex[:10]}",
        publish_retry_s=publish_retry_s,
        worker_id="cpu@publish",
        result_key=RESULT_KEY,
    )
    return Runtime(config, with_pool=False)


def _verdict() -> tuple[RunResult, RunJob]:
    j = job()
    result = RunResult(job_id=j.job_id, problem=j.problem, backend=j.backend, state=RunState.done)
    return result, j


def test_the_verdict_waits_for_redis_to_come_back(tmp_path: Path) -> None:
    server = RedisServer(tmp_path)  # not started yet: Redis is away when the job ends
    rt = _runtime(server.url, publish_retry_s=30.0)
    result, j = _verdict()
    starter = threading.Timer(1.0, server.start)
    starter.start()
    try:
        assert rt.publish(result, j, "cpu", duration_s=0.5)
        stored = rt.store.finished(result.job_id)
        assert stored is not None and stored.worker == "cpu@publish"
        assert stored.result.state is RunState.done
        assert rt.store.recent_durations("cpu") == [0.5]
    finally:
        starter.join()
        rt.close()
        server.stop()


def test_publishing_gives_up_after_the_retry_window() -> None:
    rt = _runtime(f"redis://127.0.0.1:{free_port()}/0", publish_retry_s=1.0)
    result, j = _verdict()
    started = time.monotonic()
    try:
        assert rt.publish(result, j, "cpu") is False
    finally:
        rt.close()
    elapsed = time.monotonic() - started
    assert 1.0 <= elapsed < 6.0


def test_a_second_verdict_is_not_retried_and_reports_false(redis_base: str) -> None:
    rt = _runtime(f"{redis_base}/0", publish_retry_s=30.0)
    result, j = _verdict()
    late = result.model_copy(update={"state": RunState.runtime_error})
    try:
        assert rt.publish(result, j, "cpu")
        started = time.monotonic()
        assert rt.publish(late, j, "cpu") is False
        assert time.monotonic() - started < 1.0
        stored = rt.store.finished(result.job_id)
        assert stored is not None and stored.result.state is RunState.done
    finally:
        keys = list(rt.store.r.scan_iter(match=f"{rt.config.key_prefix}*", count=500))
        if keys:
            rt.store.r.delete(*keys)
        rt.close()
