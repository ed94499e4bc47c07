"""The distributed mode end to end: a real Redis, real Celery workers, the CeleryExecutor."""

from __future__ import annotations

import os
import signal
import sys
import threading

import pytest

from kplay.kernels.models import RunState
from kplay.workers.executor import SubmitRefused
from tests.workers.celery_support import (  # noqa: F401 - fixtures
    ROOT,
    Deployment,
    RecordingSink,
    deployment_fixture,
    job,
    redis_base_fixture,
    wait_for,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def test_a_job_runs_and_its_events_and_verdict_reach_the_sink(deployment: Deployment) -> None:
    deployment.start_worker("cpu@t1")
    sink = RecordingSink()
    ex = deployment.executor(sink)
    first = job("ok")
    ex.submit(first)
    result = sink.wait(first.job_id)
    assert result.state is RunState.done
    assert result.message == "devices="  # the CPU worker hides GPUs from its jobs
    states = [e.state for e in sink.events if e.job_id == first.job_id]
    assert states == [RunState.compiling, RunState.checking]
    # The verdict is also kept by id, for a consumer that was away.
    stored = ex.store.finished(first.job_id)
    assert stored is not None and stored.worker == "cpu@t1"
    assert ex.queue_position(first.job_id) is None
    # The worker counts the job once its verdict is out (it announces the job until then).
    [worker] = wait_for(
        lambda: [w for w in ex.devices() if w["jobs_done"] >= 1], 10, "the job to be counted"
    )
    assert worker["id"] == "cpu@t1"


def test_a_real_kernel_runs_through_kplay_worker(deployment: Deployment) -> None:
    env = {**deployment.env}
    del env["KPLAY_EVAL_TARGET"]  # the real engine
    proc = deployment.spawn(
        [sys.executable, "-m", "kplay.cli", "worker", "--cpu-only"], env, "kplay-worker"
    )
    worker = wait_for(lambda: next(iter(deployment.live()), None), 60, "kplay worker to start")
    assert worker.queues == ["cpu"] and worker.kind == "cpu"
    sink = RecordingSink()
    ex = deployment.executor(sink)
    source = ROOT / "kernels/problems/vector_add/solutions/correct/vector_add.numba_cpu.py"
    run = job(source.read_text(), mode="check")
    ex.submit(run)
    result = sink.wait(run.job_id, timeout_s=150)
    assert result.state is RunState.done, result.message
    assert result.check is not None and result.check.ok and result.check.cases

    # The supervisor brings back a Celery worker that died (its whole process group).
    first_pid = worker.pid
    assert first_pid is not None
    os.killpg(os.getpgid(first_pid), signal.SIGKILL)
    again = wait_for(
        lambda: next((w for w in deployment.live() if w.pid != first_pid), None),
        60,
        "a replacement worker process",
    )
    assert again.id == worker.id
    assert proc.poll() is None


def test_each_worker_gets_only_the_jobs_of_its_queues(deployment: Deployment) -> None:
    deployment.start_worker("cpu@t3", ("cpu",))
    gpu_queues = ("gpu.any", "gpu.sm90", "gpu.h200")
    deployment.start_worker("gpu0@t3", gpu_queues, env={"CUDA_VISIBLE_DEVICES": "0"})
    sink = RecordingSink()
    ex = deployment.executor(sink)
    cpu_jobs = [job("ok") for _ in range(3)]
    gpu_jobs = [
        job("ok", backend="triton"),
        job("ok", backend="cuda", requires="sm90"),
        job("ok", backend="numba-cuda", device="NVIDIA H200"),
    ]
    for j in cpu_jobs + gpu_jobs:
        ex.submit(j)
    for j in cpu_jobs + gpu_jobs:
        assert sink.wait(j.job_id).state is RunState.done
    ran_on = {j.job_id: ex.store.finished(j.job_id).worker for j in cpu_jobs + gpu_jobs}
    assert {ran_on[j.job_id] for j in cpu_jobs} == {"cpu@t3"}
    assert {ran_on[j.job_id] for j in gpu_jobs} == {"gpu0@t3"}
    assert {sink.results[j.job_id].message for j in gpu_jobs} == {"devices=0"}

    with pytest.raises(SubmitRefused, match="gpu.sm80"):
        ex.submit(job("ok", backend="cuda", requires="sm80"))
    with pytest.raises(SubmitRefused, match="compute capability"):
        ex.submit(job("ok", backend="cuda", requires="hopper"))


def test_nothing_is_sent_when_no_worker_serves_the_queue(deployment: Deployment) -> None:
    ex = deployment.executor()
    refused = job("ok", backend="triton")
    with pytest.raises(SubmitRefused, match="no worker can run triton kernels right now"):
        ex.submit(refused)
    assert ex.store.ticket(refused.job_id) is None
    assert ex.fleet_snapshot().queues[0].depth == 0


def test_the_per_user_cap_holds_even_under_concurrent_submits(deployment: Deployment) -> None:
    deployment.start_worker("cpu@t5")
    from kplay.workers.celery_executor import CeleryExecutor

    sink = RecordingSink()
    deployment.executor(sink)  # consumes the verdicts
    capped = CeleryExecutor(deployment.url, config=deployment.config, user_run_cap=2)
    deployment.executors.append(capped)

    slow = [job("sleep:1.5", user="alice") for _ in range(2)]
    for j in slow:
        capped.submit(j)
    wait_for(lambda: capped.queue_position(slow[0].job_id) == 0, 30, "the first job to start")
    assert capped.queue_position(slow[1].job_id) == 1
    with pytest.raises(SubmitRefused, match="you already have 2 runs queued or running"):
        capped.submit(job("ok", user="alice"))
    capped.submit(job("ok", user="bob"))  # the cap is per user

    outcomes: list[str] = []

    def submit_one() -> None:
        try:
            capped.submit(job("sleep:0.2", user="carol"))
            outcomes.append("accepted")
        except SubmitRefused:
            outcomes.append("refused")

    threads = [threading.Thread(target=submit_one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["accepted"] * 2 + ["refused"] * 6

    for j in slow:
        sink.wait(j.job_id)
    capped.submit(job("ok", user="alice"))  # a finished run frees its place
