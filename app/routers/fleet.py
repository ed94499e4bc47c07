"""The fleet: what can run jobs right now, as a page that refreshes itself and as JSON.

In the distributed mode the executor reads the fleet registry (workers, queues, waits);
in the embedded mode the page shows the local executor's devices.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel

from kplay.app import format as fmt
from kplay.app.deps import ServicesDep
from kplay.app.render import render
from kplay.workers.executor import Executor

log = logging.getLogger(__name__)

router = APIRouter()
REFRESH_S = 3


class QueueOut(BaseModel):
    name: str
    depth: int
    workers: int
    busy: int
    mean_job_s: float | None = None
    wait_estimate_s: float | None = None


class FleetOut(BaseModel):
    mode: str
    workers: list[dict[str, Any]]
    queues: list[QueueOut]
    generated_at: float
    error: str | None = None


def fleet_data(executor: Executor | None) -> FleetOut:
    if executor is None:
        return FleetOut(
            mode="starting",
            workers=[],
            queues=[],
            generated_at=time.time(),
            error="the server is still starting",
        )
    snapshot = getattr(executor, "fleet_snapshot", None)
    try:
        if callable(snapshot):
            return FleetOut.model_validate(snapshot())
        return FleetOut(
            mode="embedded", workers=executor.devices(), queues=[], generated_at=time.time()
        )
    except Exception as exc:  # noqa: BLE001 - the page says the broker is away, not a 500
        log.warning("fleet snapshot failed: %s", exc)
        return FleetOut(
            mode="distributed",
            workers=[],
            queues=[],
            generated_at=time.time(),
            error=f"the job queue is not reachable right now ({type(exc).__name__})",
        )


# ---------------------------------------------------------------- page context


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


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    if value < 60:
        return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"
    return f"{value / 60:.0f} min"


def _ceilings(c: dict[str, Any] | None) -> str | None:
    if not c:
        return None
    parts = [
        fmt.rate(c.get("copy_bytes_per_s"), "B/s"),
        fmt.rate(c.get("fp32_flops_per_s"), "FLOP/s"),
    ]
    return f"{' · '.join(parts)} ({c.get('source', '?')})"


def _clocks(c: dict[str, Any] | None) -> str | None:
    if not c:
        return None
    parts = []
    if c.get("sm_mhz") is not None:
        parts.append(f"{c['sm_mhz']} MHz SM")
    if c.get("temperature_c") is not None:
        parts.append(f"{c['temperature_c']} °C")
    if c.get("power_w") is not None:
        parts.append(f"{c['power_w']} W")
    return " · ".join(parts) or None


def _worker_row(w: dict[str, Any]) -> WorkerRow:
    queues = w.get("queues") or ([w["queue"]] if w.get("queue") else [])
    age = w.get("age_s")
    return WorkerRow(
        name=str(w.get("id") or w.get("name") or "?"),
        device=str(w.get("device") or w.get("name") or "?"),
        kind=str(w.get("kind") or "?"),
        capability=w.get("compute_capability"),
        queues=list(queues),
        busy=bool(w.get("busy")),
        current_job=w.get("current_job"),
        jobs_done=w.get("jobs_done"),
        heartbeat="in this process" if age is None else f"{_seconds(age)} ago",
        ceilings=_ceilings(w.get("ceilings")),
        clocks=_clocks(w.get("clocks")),
    )


def fleet_page(data: FleetOut) -> FleetPage:
    queues = [
        QueueRow(
            q.name, q.depth, q.workers, q.busy, _seconds(q.mean_job_s), _seconds(q.wait_estimate_s)
        )
        for q in data.queues
    ]
    return FleetPage(
        title="Fleet",
        mode=data.mode,
        refresh_s=REFRESH_S,
        workers=[_worker_row(w) for w in data.workers],
        queues=queues,
        error=data.error,
    )


# ---------------------------------------------------------------- routes


@router.get(
    "/api/v1/fleet",
    response_model=FleetOut,
    tags=["api"],
    summary="Workers, queues and wait estimates",
)
def fleet_json(services: ServicesDep) -> FleetOut:
    return fleet_data(services.executor)


@router.get("/fleet", response_class=HTMLResponse, include_in_schema=False)
def fleet_html(request: Request, services: ServicesDep) -> Response:
    page = fleet_page(fleet_data(services.executor))
    if request.headers.get("HX-Request"):
        # The page polls itself: answer with the named block only.
        template = services.templates.env.get_template("fleet.html")
        context = template.new_context({"request": request, "page": page})
        return HTMLResponse("".join(template.blocks["fleet"](context)))
    return render(request, services, "fleet.html", page=page)
