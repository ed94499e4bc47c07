"""What the fleet registry holds and what the fleet page shows, as pydantic models.

A worker process registers a `WorkerInfo` (planned by `kplay worker`), beats a
`WorkerBeat` into Redis every couple of seconds, and readers see each live one as a
`LiveWorker`. A `FleetSnapshot` is the whole fleet at one moment: workers and each
queue's `QueueState`. These models need no Redis client, so the web app of the embedded
mode can build a snapshot of its own local pool without the distributed extras.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kplay.kernels.models import Ceilings

FleetMode = Literal["embedded", "distributed", "starting"]


class Clocks(BaseModel):
    """A GPU's clocks, temperature and power as NVML read them a moment ago."""

    sm_mhz: int | None = None
    mem_mhz: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None


class LiveFacts(BaseModel):
    """What a worker measures about its device at each beat (both optional)."""

    ceilings: Ceilings | None = None
    clocks: Clocks | None = None


class WorkerInfo(BaseModel):
    """One worker process's registration: its id, its queues and its device.

    The device facts are whatever the host planner found (`kplay worker`); facts this
    model does not name are kept as they are, so a worker newer than the web side still
    shows everything it reports.
    """

    model_config = ConfigDict(extra="allow")

    id: str
    kind: str
    device: str
    host: str | None = None
    queues: list[str] = Field(default_factory=list)
    device_kind: str | None = None
    gpu_index: int | None = None
    uuid: str | None = None
    compute_capability: str | None = None
    driver: str | None = None
    cuda: str | None = None
    memory_mib: int | None = None
    # workers.sandbox.SandboxStatus of the worker's children: not "active" means plain
    # processes, to be trusted with local code only.
    sandbox: dict[str, Any] | None = None

    def facts(self) -> dict[str, Any]:
        """Every field, named or not, as plain JSON values."""
        return self.model_dump(mode="json")


class WorkerBeat(WorkerInfo, LiveFacts):
    """The registry entry a worker rewrites at each heartbeat.

    The count and the stamps are None only for a pool inside the web process (the embedded
    mode), which never beats.
    """

    busy: bool = False
    current_job: str | None = None
    job_started_at: float | None = None
    jobs_done: int | None = None
    started_at: float | None = None
    last_seen: float | None = None
    pid: int | None = None


class LiveWorker(WorkerBeat):
    """A registry entry as read back: `age_s` since its last beat (None: in this process)."""

    age_s: float | None = None


class QueueState(BaseModel):
    """One capability queue: messages waiting, who serves it and the expected wait."""

    name: str
    depth: int
    workers: int
    busy: int
    mean_job_s: float | None = None
    wait_estimate_s: float | None = None


class FleetSnapshot(BaseModel):
    """The whole fleet for the page and the API."""

    mode: FleetMode
    workers: list[LiveWorker] = Field(default_factory=list)
    queues: list[QueueState] = Field(default_factory=list)
    generated_at: float
    error: str | None = None
