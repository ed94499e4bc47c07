"""Verdicts and progress on Redis count only when signed with the deployment's result key.

An attacker here can write to Redis but does not hold KPLAY_RESULT_KEY, which evaluation
children never receive. What they write straight into the result stream or the stored
verdicts is logged with its job id and ignored; what a worker signs is taken. Without the
key, neither the web side nor a worker starts.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from kplay.config import WebSettings, WorkerSettings
from kplay.kernels.models import ProgressEvent, RunResult, RunState
from kplay.workers.celery_app import WorkerConfig
from kplay.workers.jobstore import STREAM_MAXLEN, JobStore
from kplay.workers.limits import Limits, child_env
from kplay.workers.signing import KEY_VARIABLE, MissingResultKey, Signer, result_key
from kplay.workers.tasks import job_limits
from tests.workers.celery_support import (  # noqa: F401 - fixtures
    RESULT_KEY,
    Deployment,
    RecordingSink,
    deployment_fixture,
    job,
    redis_base_fixture,
    wait_for,
)

KEY = RESULT_KEY.encode()
ATTACKER_KEY = os.urandom(32).hex().encode()  # a key, just not the deployment's

# ---------------------------------------------------------------- the key


def test_the_children_never_see_the_result_key(tmp_path: Path) -> None:
    # A worker's environment: every setting, the key among them.
    parent = {name: "1" for name in WebSettings.env_names()} | {KEY_VARIABLE: RESULT_KEY}
    config = WorkerConfig(result_key=RESULT_KEY, cache_dir=tmp_path)
    for limits in (Limits(), Limits.from_settings(config), job_limits(config)):
        env = child_env(limits, tmp_path / "home", tmp_path / "cache", parent)
        assert KEY_VARIABLE not in env
        assert not [name for name, value in env.items() if RESULT_KEY in value]


def test_a_missing_or_short_key_is_refused_without_being_shown() -> None:
    with pytest.raises(MissingResultKey, match=f"{KEY_VARIABLE} is not set.*secrets.token_hex"):
        result_key(WorkerSettings(result_key=None))
    with pytest.raises(MissingResultKey, match="too short") as caught:
        result_key(WorkerSettings(result_key=SecretStr("short-secret-value")))
    assert "short-secret-value" not in str(caught.value)
    assert str(WorkerSettings(result_key=RESULT_KEY).result_key) == "**********"


def test_a_signature_covers_the_job_the_kind_the_deployment_and_the_data() -> None:
    signer = Signer(KEY, "kplay")
    sig = signer.sign("result", "job-1", '{"state": "done"}')
    assert signer.verify("result", "job-1", '{"state": "done"}', sig)
    assert not signer.verify("result", "job-1", '{"state": "wrong"}', sig)
    assert not signer.verify("result", "job-2", '{"state": "done"}', sig)
    assert not signer.verify("event", "job-1", '{"state": "done"}', sig)
    assert not Signer(KEY, "other").verify("result", "job-1", '{"state": "done"}', sig)
    assert not Signer(ATTACKER_KEY, "kplay").verify("result", "job-1", '{"state": "done"}', sig)
    assert not signer.verify("result", "job-1", '{"state": "done"}', None)
    assert not signer.verify("result", None, '{"state": "done"}', sig)


def test_the_web_side_and_the_workers_refuse_to_start_without_the_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from kplay.cli import main as kplay_main
    from kplay.workers import fleet_main
    from kplay.workers.celery_executor import CeleryExecutor

    for name in list(os.environ):
        if name.startswith("KPLAY_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("KPLAY_BROKER_URL", "redis://127.0.0.1:1/0")
    with pytest.raises(MissingResultKey, match=KEY_VARIABLE):
        CeleryExecutor("redis://127.0.0.1:1/0")
    assert kplay_main(["serve"]) == 2
    assert f"{KEY_VARIABLE} is not set" in capsys.readouterr().err
    assert fleet_main.main(argparse.Namespace(cpu_only=True)) == 2
    assert f"{KEY_VARIABLE} is not set" in capsys.readouterr().err


# ---------------------------------------------------------------- forgeries on a real Redis


class AllResults(RecordingSink):
    """Keeps every verdict the sink was handed, not only the last one per job."""

    def __init__(self) -> None:
        super().__init__()
        self.all: list[RunResult] = []

    def on_result(self, result: RunResult) -> None:
        with self.lock:
            self.all.append(result)
        super().on_result(result)


@pytest.fixture
def store(deployment: Deployment) -> Iterator[JobStore]:
    from kplay.workers.jobstore import connect

    signer = Signer(KEY, deployment.prefix)
    yield JobStore(connect(deployment.url), deployment.prefix, signer=signer)


def _verdict(job_id: str, state: RunState, message: str) -> RunResult:
    return RunResult(
        job_id=job_id, problem="vector_add", backend="numba-cpu", state=state, message=message
    )


def _envelope(result: RunResult) -> str:
    return json.dumps(
        {"worker": "cpu@evil", "finished_at": 0, "result": result.model_dump(mode="json")}
    )


def _forge_stream_result(store: JobStore, job_id: str, data: str, sig: str | None) -> None:
    """What an attacker with Redis access writes: a well-formed entry, signed or not."""
    fields = {"kind": "result", "job_id": job_id, "worker": "cpu@evil", "data": data}
    if sig is not None:
        fields["sig"] = sig
    store.r.xadd(store.keys.stream, fields, maxlen=STREAM_MAXLEN)


@pytest.mark.redis
@pytest.mark.parametrize("signed_with", [None, "attacker", "other job"])
def test_a_forged_verdict_on_the_stream_is_logged_and_ignored(
    deployment: Deployment,
    store: JobStore,
    caplog: pytest.LogCaptureFixture,
    signed_with: str | None,
) -> None:
    caplog.set_level(logging.WARNING, logger="kplay.workers.signing")
    sink = AllResults()
    deployment.executor(sink)
    victim = job()
    data = _envelope(_verdict(victim.job_id, RunState.done, "forged"))
    sig = {
        None: None,
        "attacker": Signer(ATTACKER_KEY, store.keys.prefix).sign("result", victim.job_id, data),
        # A real signature, lifted from another job's record.
        "other job": store.signer.sign("result", "another-job", data),
    }[signed_with]
    _forge_stream_result(store, victim.job_id, data, sig)
    # Then the worker's own verdict, signed: it is the one the run gets.
    assert store.finish(
        _verdict(victim.job_id, RunState.wrong, "honest"), user="u", queue="cpu", worker="w"
    )
    taken = sink.wait(victim.job_id, 20)
    assert (taken.state, taken.message) == (RunState.wrong, "honest")
    assert [r.message for r in sink.all] == ["honest"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(victim.job_id in w and "result record" in w for w in warnings), warnings


@pytest.mark.redis
def test_a_forged_progress_event_never_reaches_the_run(
    deployment: Deployment, store: JobStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kplay.workers.signing")
    sink = RecordingSink()
    deployment.executor(sink)
    victim = job()
    fake = ProgressEvent(job_id=victim.job_id, state=RunState.timing, detail="forged")
    store.r.xadd(
        store.keys.stream,
        {"kind": "event", "job_id": victim.job_id, "worker": "w", "data": fake.model_dump_json()},
    )
    real = ProgressEvent(job_id=victim.job_id, state=RunState.checking, detail="signed")
    store.publish_event(real, "cpu@test")
    wait_for(lambda: sink.events, 20, "the signed event")
    assert [e.detail for e in sink.events] == ["signed"]
    assert any(victim.job_id in r.getMessage() for r in caplog.records)


@pytest.mark.redis
def test_a_forged_stored_verdict_is_not_read_and_does_not_keep_the_real_one_out(
    store: JobStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kplay.workers.signing")
    victim = job()
    forged = _verdict(victim.job_id, RunState.done, "forged")
    data = _envelope(forged)
    # The old layout and the new one without a valid signature: neither is read.
    for raw in (data, json.dumps({"data": data, "sig": "0" * 64})):
        store.r.set(store.keys.result(victim.job_id), raw)
        assert store.finished(victim.job_id) is None
    assert sum(victim.job_id in r.getMessage() for r in caplog.records) == 2
    honest = _verdict(victim.job_id, RunState.wrong, "honest")
    assert store.finish(honest, user="u", queue="cpu", worker="cpu@test")
    stored = store.finished(victim.job_id)
    assert stored is not None and stored.result.message == "honest"
    # The first signed verdict still wins over a later one.
    assert not store.finish(forged, user="u", queue="cpu", worker="cpu@test")


@pytest.mark.redis
def test_a_signed_verdict_from_a_real_worker_is_taken(deployment: Deployment) -> None:
    sink = RecordingSink()
    ex = deployment.executor(sink)
    deployment.start_worker("cpu@signing")
    run = job("ok")
    ex.submit(run)
    assert sink.wait(run.job_id).state is RunState.done
    assert ex.store.finished(run.job_id) is not None
    assert any(e.job_id == run.job_id for e in sink.events)


@pytest.mark.redis
def test_a_celery_worker_without_the_key_exits_before_taking_jobs(
    deployment: Deployment,
) -> None:
    proc = deployment.start_worker(
        "cpu@nokey", env={"CUDA_VISIBLE_DEVICES": "", "KPLAY_RESULT_KEY": ""}, wait=False
    )
    try:
        code = proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail("a worker without the result key kept running")
    assert code != 0
    text = (deployment.logs / "cpu_nokey.log").read_text()
    assert f"{KEY_VARIABLE} is not set" in text
    assert not any(w.id == "cpu@nokey" for w in deployment.live())
