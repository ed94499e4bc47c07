"""Both executors' wait estimates read what runs and what waits ahead (workers.waits)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kplay.kernels.models import RunResult, RunState
from kplay.workers.celery_executor import CeleryExecutor, QueuePicture
from kplay.workers.fleet import Heartbeat
from kplay.workers.fleet_models import WorkerInfo
from kplay.workers.jobstore import JobStore, connect
from kplay.workers.local import LocalExecutor
from kplay.workers.signing import Signer
from kplay.workers.waits import MIN_SAMPLES, Durations
from tests.workers.celery_support import (  # noqa: F401
    RESULT_KEY,
    job,
    redis_base_fixture,
)
from tests.workers.test_local_executor import LIMITS, Sink

OK = "tests.workers.jobfuncs:ok"


def test_the_local_estimate_counts_the_running_job_and_those_ahead(tmp_path: Path) -> None:
    executor = LocalExecutor(1, LIMITS, target=OK)
    sink = Sink()
    executor.start(sink)
    try:
        gate = tmp_path / "open"
        held = job(f"gate:{gate}")
        executor.submit(held)
        sink.wait_event(held.job_id)
        second, third = job(), job()
        executor.submit(second)
        executor.submit(third)
        # No job has finished yet: nothing to go by.
        assert executor.wait_estimate_s(second.job_id) is None
        gate.touch()
        sink.wait_results(3)

        executor.durations = Durations()  # known durations from here on
        executor.durations.add(("vector_add", "numba-cpu"), 1.0)
        for _ in range(MIN_SAMPLES):
            executor.durations.add(("vector_add", "numba-cpu"), 2.0)
        gate.unlink()
        held = job(f"gate:{gate}")
        executor.submit(held)
        sink.wait_event(held.job_id)
        second, third = job(), job()
        executor.submit(second)
        executor.submit(third)
        assert executor.wait_estimate_s(held.job_id) == 0.0
        # The held job has just started: recent jobs of its kind ran 1.83 s, and the 4 s
        # limit counts once among them (2.14 s), so it has up to that much left; the third
        # waits for it and then for one more such job.
        first_wait = executor.wait_estimate_s(second.job_id)
        assert first_wait is not None and 0.0 < first_wait <= 2.2
        second_wait = executor.wait_estimate_s(third.job_id)
        assert second_wait is not None
        assert second_wait == pytest.approx(first_wait + 2.14, abs=0.2)
        assert executor.wait_estimate_s("no-such-job") is None
        gate.touch()
        sink.wait_results(6)
    finally:
        executor.stop()


@pytest.fixture
def store(redis_base: str) -> Iterator[JobStore]:
    prefix = f"kplaytest-{uuid.uuid4().hex[:10]}"
    s = JobStore(connect(f"{redis_base}/0"), prefix, signer=Signer(RESULT_KEY.encode(), prefix))
    yield s
    keys = list(s.r.scan_iter(match=f"{prefix}*", count=500))
    if keys:
        s.r.delete(*keys)


@pytest.mark.redis
def test_durations_are_kept_with_their_kind_and_the_queue_is_read_in_order(
    store: JobStore,
) -> None:
    store.r.lpush(store.keys.durations("cpu"), "4.0")  # written by an older worker
    for problem, seconds in (("vector_add", 1.0), ("sgemm", 10.0)):
        j = job("x")
        j = j.model_copy(update={"problem": problem})
        store.admit(j, "cpu", cap=0)
        result = RunResult(
            job_id=j.job_id, problem=problem, backend="numba-cpu", state=RunState.done
        )
        assert store.finish(result, user="anonymous", queue="cpu", worker="w", duration_s=seconds)
    assert store.recent_jobs("cpu") == [
        (10.0, ("sgemm", "numba-cpu")),
        (1.0, ("vector_add", "numba-cpu")),
        (4.0, None),
    ]
    assert store.recent_durations("cpu") == [10.0, 1.0, 4.0]

    running, waiting = job("r"), [job("a"), job("b")]
    for j in (running, *waiting):
        store.admit(j, "cpu", cap=0)
    store.mark_running(running, "cpu", "cpu@h")
    picture = QueuePicture.read(store, "cpu", time.monotonic())
    assert [kind for kind, _ in picture.running] == [("vector_add", "numba-cpu")]
    assert picture.queued == [("vector_add", "numba-cpu")] * 2
    assert picture.order == {waiting[0].job_id: 0, waiting[1].job_id: 1}
    assert picture.workers == 0  # no heartbeat in this test
    assert sorted(picture.durations.samples(("vector_add", "numba-cpu"))) == [1.0, 4.0, 10.0]


@pytest.mark.redis
def test_a_job_queued_after_the_last_reading_gets_an_estimate_at_once(redis_base: str) -> None:
    prefix = f"kplaytest-{uuid.uuid4().hex[:10]}"
    executor = CeleryExecutor(f"{redis_base}/0", key_prefix=prefix, result_key=RESULT_KEY)
    store = executor.store
    try:
        Heartbeat(store, WorkerInfo(id="cpu@h", kind="cpu", device="c", queues=["cpu"])).beat()
        done = RunResult(job_id="", problem="vector_add", backend="numba-cpu", state=RunState.done)
        for _ in range(MIN_SAMPLES):
            j = job("x")
            store.admit(j, "cpu", cap=0)
            store.mark_running(j, "cpu", "cpu@h")
            result = done.model_copy(update={"job_id": j.job_id})
            store.finish(result, user="anonymous", queue="cpu", worker="cpu@h", duration_s=3.0)
        running, first = job("r"), job("a")
        for j in (running, first):
            store.admit(j, "cpu", cap=0)
        store.mark_running(running, "cpu", "cpu@h")
        # Five runs of 3 s and the 30 s limit counted once among them: 7.5 s a run.
        assert executor.wait_estimate_s(first.job_id) == pytest.approx(7.5, abs=0.2)
        # The card of a new run is drawn right after it is queued: within the second the
        # queue's reading is kept, it must still be counted.
        second = job("b")
        store.admit(second, "cpu", cap=0)
        assert executor.wait_estimate_s(second.job_id) == pytest.approx(15.0, abs=0.3)
    finally:
        keys = list(store.r.scan_iter(match=f"{prefix}*", count=500))
        if keys:
            store.r.delete(*keys)
