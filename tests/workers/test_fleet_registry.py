"""The fleet registry and the job store against a real Redis (no worker processes)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest

from kplay.kernels.models import Ceilings, RunResult, RunState
from kplay.workers.fleet import Heartbeat, live_workers, snapshot
from kplay.workers.fleet_models import Clocks, LiveFacts, QueueState, WorkerInfo
from kplay.workers.jobstore import JobStore, connect
from kplay.workers.signing import Signer
from tests.workers.celery_support import (  # noqa: F401
    RESULT_KEY,
    job,
    redis_base_fixture,
    wait_for,
)

pytestmark = pytest.mark.redis


@pytest.fixture
def store(redis_base: str) -> Iterator[JobStore]:
    prefix = f"kplaytest-{uuid.uuid4().hex[:10]}"
    s = JobStore(connect(f"{redis_base}/0"), prefix, signer=Signer(RESULT_KEY.encode(), prefix))
    yield s
    keys = list(s.r.scan_iter(match=f"{prefix}*", count=500))
    if keys:
        s.r.delete(*keys)


def _beat(store: JobStore, worker_id: str, **kw: float) -> Heartbeat:
    info = WorkerInfo(id=worker_id, kind="gpu", device="NVIDIA H200", queues=["gpu.any"])
    return Heartbeat(store, info, interval_s=kw.get("interval_s", 0.2), ttl_s=kw.get("ttl_s", 1.0))


def test_a_heartbeat_announces_state_and_current_job(store: JobStore) -> None:
    hb = _beat(store, "gpu0@h")
    hb.start()
    [w] = wait_for(lambda: live_workers(store), 5, "the first beat")
    assert (w.id, w.busy, w.current_job) == ("gpu0@h", False, None)
    running = job("x", backend="triton")
    hb.begin(running, "gpu.any")
    [w] = live_workers(store)
    assert w.busy and w.current_job == running.job_id
    hb.end()
    [w] = live_workers(store)
    assert not w.busy and w.jobs_done == 1 and w.age_s is not None and w.age_s >= 0
    hb.stop()
    assert live_workers(store) == []  # a clean exit leaves the roll at once


def test_a_silent_worker_drops_out_of_the_roll(store: JobStore) -> None:
    hb = _beat(store, "gpu1@h", ttl_s=0.5)
    hb.beat()  # one beat, no thread: as if the process died right after
    assert [w.id for w in live_workers(store)] == ["gpu1@h"]
    wait_for(lambda: live_workers(store) == [], 5, "the entry to expire")
    assert store.r.scard(store.keys.workers) == 0


def test_a_beat_rebuilds_the_ticket_of_a_running_job_after_redis_lost_it(
    store: JobStore,
) -> None:
    hb = _beat(store, "gpu0@h")
    running = job("x", backend="triton", user="ann")
    store.admit(running, "gpu.any", cap=0)
    store.mark_running(running, "gpu.any", "gpu0@h")
    hb.begin(running, "gpu.any")
    store.r.delete(store.keys.ticket(running.job_id))  # what a Redis restart does
    hb.beat()
    ticket = store.ticket(running.job_id)
    assert ticket is not None and ticket["state"] == "running" and ticket["user"] == "ann"
    # Once the verdict is out no beat brings the ticket back.
    result = RunResult(
        job_id=running.job_id, problem="vector_add", backend="triton", state=RunState.done
    )
    assert store.finish(result, user="ann", queue="gpu.any", worker="gpu0@h")
    hb.end()
    hb.beat()
    assert store.ticket(running.job_id) is None


def test_the_first_verdict_wins(store: JobStore) -> None:
    j = job("x")
    store.admit(j, "cpu", cap=0)
    first = RunResult(
        job_id=j.job_id, problem="vector_add", backend="numba-cpu", state=RunState.done
    )
    late = first.model_copy(update={"state": RunState.runtime_error})
    assert store.finish(first, user="anonymous", queue="cpu", worker="a", duration_s=1.5)
    assert not store.finish(late, user="anonymous", queue="cpu", worker="b")
    stored = store.finished(j.job_id)
    assert stored is not None and stored.result.state is RunState.done and stored.worker == "a"
    assert store.r.xlen(store.keys.stream) == 1
    assert store.r.ttl(store.keys.result(j.job_id)) > 0
    assert store.recent_durations("cpu") == [1.5]


def test_positions_follow_arrival_order(store: JobStore) -> None:
    jobs = [job("x") for _ in range(3)]
    for j in jobs:
        assert store.admit(j, "cpu", cap=0) is None
    assert [store.position(j.job_id) for j in jobs] == [1, 2, 3]
    store.mark_running(jobs[0], "cpu", "cpu@h")
    assert [store.position(j.job_id) for j in jobs] == [0, 1, 2]
    store.requeue(jobs[0].job_id, "cpu")  # its worker vanished: back to the front
    assert store.position(jobs[0].job_id) == 1


def test_the_snapshot_counts_waiting_messages_and_estimates_the_wait(store: JobStore) -> None:
    celery_prefix = store.keys.prefix + ":celery:"
    for i in range(2):
        hb = _beat(store, f"gpu{i}@h")
        hb.beat()
    for _ in range(4):
        store.r.lpush(celery_prefix + "gpu.any", json.dumps({"headers": {"id": "x"}}))
    for seconds in (1.0, 3.0):
        store.r.lpush(store.keys.durations("gpu.any"), seconds)
    snap = snapshot(store, celery_prefix, ["cpu"])
    queues = {q.name: q for q in snap.queues}
    assert queues["gpu.any"] == QueueState(
        name="gpu.any", depth=4, workers=2, busy=0, mean_job_s=2.0, wait_estimate_s=4.0
    )
    assert queues["cpu"].workers == 0 and queues["cpu"].wait_estimate_s is None
    assert [w.id for w in snap.workers] == ["gpu0@h", "gpu1@h"]
    assert snap.mode == "distributed" and snap.generated_at <= time.time()


def test_a_beat_carries_the_device_facts_and_the_live_ones(store: JobStore) -> None:
    info = WorkerInfo.model_validate(
        {
            "id": "gpu0@h",
            "kind": "gpu",
            "device": "NVIDIA H200",
            "gpu_index": 0,
            "compute_capability": "9.0",
            "queues": ["gpu.any", "gpu.sm90"],
            "numa_node": 1,  # a fact this side does not name is still shown
        }
    )
    ceilings = Ceilings(device="NVIDIA H200", kind="gpu", source="datasheet", copy_bytes_per_s=4e12)
    facts = LiveFacts(ceilings=ceilings, clocks=Clocks(sm_mhz=1980, power_w=120.5))
    Heartbeat(store, info, extra=lambda: facts).beat()
    [w] = live_workers(store)
    assert (w.gpu_index, w.compute_capability, w.queues) == (0, "9.0", ["gpu.any", "gpu.sm90"])
    assert w.ceilings == ceilings and w.clocks == Clocks(sm_mhz=1980, power_w=120.5)
    assert w.model_dump()["numa_node"] == 1 and w.pid is not None and w.jobs_done == 0


def test_facts_that_fail_leave_the_beat_without_them(store: JobStore) -> None:
    def broken() -> LiveFacts:
        raise RuntimeError("NVML went away")

    info = WorkerInfo(id="gpu0@h", kind="gpu", device="NVIDIA H200", queues=["gpu.any"])
    Heartbeat(store, info, extra=broken).beat()
    [w] = live_workers(store)
    assert w.id == "gpu0@h" and w.ceilings is None and w.clocks is None


def test_an_unreadable_entry_is_left_out_of_the_roll(store: JobStore) -> None:
    _beat(store, "gpu0@h").beat()
    store.r.set(store.keys.worker("odd@h"), json.dumps({"id": "odd@h"}))  # no kind, no device
    store.r.sadd(store.keys.workers, "odd@h")
    assert [w.id for w in live_workers(store)] == ["gpu0@h"]
    assert [w.id for w in snapshot(store, store.keys.prefix + ":celery:").workers] == ["gpu0@h"]


def test_a_verdict_keeps_nan_through_redis(store: JobStore) -> None:
    # An element a kernel never wrote keeps its NaN poison; the verdict must say so.
    from kplay.kernels.models import CaseCheck, CheckStage

    j = job("x")
    case = CaseCheck(name="n=1", params={"n": 1}, ok=False, got=float("nan"), expected=2.0)
    result = RunResult(
        job_id=j.job_id,
        problem="vector_add",
        backend="numba-cpu",
        state=RunState.wrong,
        check=CheckStage(ok=False, cases=[case]),
    )
    assert store.finish(result, user="anonymous", queue="cpu", worker="a")
    stored = store.finished(j.job_id)
    assert stored is not None and stored.result.check is not None
    got = stored.result.check.cases[0].got
    assert got is not None and got != got  # NaN


def test_a_lost_job_taken_again_at_once_is_still_seen_running(store: JobStore) -> None:
    # The janitor gives the ticket back before the message: a worker that takes the message
    # at once marks the job running, and the janitor's next rounds still see it there.
    from kplay.workers.celery_app import WorkerConfig
    from kplay.workers.recovery import Janitor

    lost = job("x")
    store.mark_running(lost, "cpu", "gone@h")

    class TakenAtOnce(Janitor):
        def _unacked_tag(self, job_id: str) -> str | None:
            return "1"

        def _restore(self, tag: str) -> None:
            store.mark_running(lost, "cpu", "quick@h")

    janitor = TakenAtOnce(store, celery=None, config=WorkerConfig())  # type: ignore[arg-type]
    janitor._recover(lost.job_id, store.running_jobs()[lost.job_id])
    assert store.running_jobs()[lost.job_id]["worker"] == "quick@h"
