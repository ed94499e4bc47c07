"""The fleet service: which snapshot each executor gives, and how the page words it."""

from __future__ import annotations

import socket

from kplay.app.executors import FleetAware, Reconciling
from kplay.app.services.fleet_view import fleet_page, fleet_snapshot, local_worker, seconds
from kplay.kernels.models import Ceilings
from kplay.workers.fleet_models import Clocks, FleetSnapshot, LiveWorker, QueueState
from tests.app.fakes import FakeExecutor


def _dead_redis_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"redis://127.0.0.1:{s.getsockname()[1]}/0"


def test_the_local_pool_is_one_row_in_this_process() -> None:
    snap = fleet_snapshot(FakeExecutor())
    assert snap.mode == "embedded" and snap.queues == [] and snap.error is None
    [row] = fleet_page(snap).workers
    assert (row.name, row.device, row.kind) == ("local", "Fake Device 9000", "cpu")
    assert row.heartbeat == "in this process" and row.jobs_done is None and not row.busy


def test_a_local_device_keeps_its_queue_and_its_description() -> None:
    device = {"name": "NVIDIA H200", "kind": "gpu", "gpus": 1, "queue": "local", "workers": 2}
    worker = local_worker(device)
    assert (worker.id, worker.device, worker.queues) == ("local", "NVIDIA H200", ["local"])
    assert worker.model_dump()["gpus"] == 1 and worker.age_s is None


def test_no_executor_yet_means_starting() -> None:
    snap = fleet_snapshot(None)
    assert snap.mode == "starting" and snap.error == "the server is still starting"


def test_an_unreachable_queue_is_said_not_raised() -> None:
    from kplay.workers.celery_executor import CeleryExecutor

    # Never started: nothing runs in the background.
    executor = CeleryExecutor(_dead_redis_url(), result_key="k" * 32)
    try:
        assert isinstance(executor, FleetAware) and isinstance(executor, Reconciling)
        snap = fleet_snapshot(executor)
    finally:
        executor.stop()
    assert snap.mode == "distributed" and snap.workers == []
    assert snap.error is not None and "ConnectionError" in snap.error


def test_only_a_remote_executor_speaks_the_distributed_protocols() -> None:
    from kplay.workers.limits import Limits
    from kplay.workers.local import LocalExecutor

    local = LocalExecutor(1, Limits())  # not started: no pool
    for executor in (FakeExecutor(), local):
        assert not isinstance(executor, FleetAware) and not isinstance(executor, Reconciling)


def test_the_page_words_workers_and_queues() -> None:
    ceilings = Ceilings(
        device="NVIDIA H200",
        kind="gpu",
        source="calibrated",
        copy_bytes_per_s=4.1e12,
        fp32_flops_per_s=6.0e13,
    )
    worker = LiveWorker(
        id="gpu0@rack1",
        kind="gpu",
        device="NVIDIA H200",
        compute_capability="9.0",
        queues=["gpu.any", "gpu.sm90"],
        busy=True,
        current_job="abc123",
        jobs_done=7,
        ceilings=ceilings,
        clocks=Clocks(sm_mhz=1980, temperature_c=41, power_w=120.5),
        age_s=1.2,
    )
    queue = QueueState(name="gpu.sm90", depth=3, workers=1, busy=1, mean_job_s=75.0)
    page = fleet_page(
        FleetSnapshot(mode="distributed", workers=[worker], queues=[queue], generated_at=0.0)
    )
    [row] = page.workers
    assert (row.name, row.capability, row.busy, row.jobs_done) == ("gpu0@rack1", "9.0", True, 7)
    assert row.heartbeat == "1.2 s ago"
    assert row.ceilings == "4.10 TB/s · 60.0 TFLOP/s (calibrated)"
    assert row.clocks == "1980 MHz SM · 41 °C · 120.5 W"
    [q] = page.queues
    assert (q.name, q.depth, q.mean_job, q.wait) == ("gpu.sm90", 3, "1 min", "—")
    assert page.refresh_s == 3 and page.mode == "distributed"


def test_seconds_read_naturally() -> None:
    assert [seconds(v) for v in (None, 2.25, 42.0, 600.0)] == ["—", "2.2 s", "42 s", "10 min"]
