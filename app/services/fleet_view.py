"""The fleet as the API returns it and as the /fleet page shows it.

In the distributed mode the executor reads the fleet registry (workers, queues, waits);
in the embedded mode the snapshot is the local executor's pool, with no queue.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from kplay.app import format as fmt
from kplay.app.executors import FleetAware
from kplay.kernels.models import Ceilings
from kplay.workers.executor import Executor
from kplay.workers.fleet_models import Clocks, FleetSnapshot, LiveWorker, QueueState

log = logging.getLogger(__name__)

REFRESH_S = 3


def fleet_snapshot(executor: Executor | None) -> FleetSnapshot:
    """What can run jobs now; never raises (a broker that is away is said in `error`)."""
    if executor is None:
        return FleetSnapshot(
            mode="starting", generated_at=time.time(), error="the server is still starting"
        )
    try:
        if isinstance(executor, FleetAware):
            return executor.fleet_snapshot()
        workers = [local_worker(device) for device in executor.devices()]
        return FleetSnapshot(mode="embedded", workers=workers, generated_at=time.time())
    except Exception as exc:  # noqa: BLE001 - the page says the broker is away, not a 500
        log.warning("fleet snapshot failed: %s", exc)
        return FleetSnapshot(
            mode="distributed",
            generated_at=time.time(),
            error=f"the job queue is not reachable right now ({type(exc).__name__})",
        )


def local_worker(device: dict[str, Any]) -> LiveWorker:
    """One device of the embedded mode's pool as a fleet row (it lives in this process).

    The executor's description is kept whole; the row's id is the executor's queue.
    """
    queue = device.get("queue")
    return LiveWorker.model_validate(
        {
            **device,
            "id": str(queue or "local"),
            "kind": str(device.get("kind") or "?"),
            "device": str(device.get("name") or "?"),
            "queues": [queue] if queue else [],
        }
    )


# ---------------------------------------------------------------- the page


@dataclass(frozen=True)
class WorkerRow:
    name: str
    device: str
    kind: str
    capability: str | None
    queues: list[str]
    busy: bool
    current_job: str | None
    jobs_done: int | None
    heartbeat: str
    ceilings: str | None
    clocks: str | None


@dataclass(frozen=True)
class QueueRow:
    name: str
    depth: int
    workers: int
    busy: int
    mean_job: str
    wait: str


@dataclass(frozen=True)
class FleetPage:
    title: str
    mode: str
    refresh_s: int
    workers: list[WorkerRow] = field(default_factory=list)
    queues: list[QueueRow] = field(default_factory=list)
    error: str | None = None


def seconds(value: float | None) -> str:
    if value is None:
        return "—"
    if value < 60:
        return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"
    return f"{value / 60:.0f} min"


def ceilings_text(c: Ceilings | None) -> str | None:
    if c is None:
        return None
    parts = [fmt.rate(c.copy_bytes_per_s, "B/s"), fmt.rate(c.fp32_flops_per_s, "FLOP/s")]
    return f"{' · '.join(parts)} ({c.source})"


def clocks_text(c: Clocks | None) -> str | None:
    if c is None:
        return None
    parts = []
    if c.sm_mhz is not None:
        parts.append(f"{c.sm_mhz} MHz SM")
    if c.temperature_c is not None:
        parts.append(f"{c.temperature_c} °C")
    if c.power_w is not None:
        parts.append(f"{c.power_w} W")
    return " · ".join(parts) or None


def worker_row(w: LiveWorker) -> WorkerRow:
    return WorkerRow(
        name=w.id,
        device=w.device,
        kind=w.kind,
        capability=w.compute_capability,
        queues=list(w.queues),
        busy=w.busy,
        current_job=w.current_job,
        jobs_done=w.jobs_done,
        heartbeat="in this process" if w.age_s is None else f"{seconds(w.age_s)} ago",
        ceilings=ceilings_text(w.ceilings),
        clocks=clocks_text(w.clocks),
    )


def queue_row(q: QueueState) -> QueueRow:
    return QueueRow(
        q.name, q.depth, q.workers, q.busy, seconds(q.mean_job_s), seconds(q.wait_estimate_s)
    )


def fleet_page(snapshot: FleetSnapshot) -> FleetPage:
    return FleetPage(
        title="Fleet",
        mode=snapshot.mode,
        refresh_s=REFRESH_S,
        workers=[worker_row(w) for w in snapshot.workers],
        queues=[queue_row(q) for q in snapshot.queues],
        error=snapshot.error,
    )
