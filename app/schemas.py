"""Request and response bodies of the JSON API (documented by OpenAPI at /docs)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kplay.app.db.models import Run
from kplay.app.services.cards import parse_result
from kplay.kernels.models import LaunchOverride


class ErrorOut(BaseModel):
    detail: str = Field(description="what was wrong, in one sentence")


class RunCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    problem: str = Field(description="problem slug, e.g. vector_add")
    backend: str = Field(description="cuda, numba-cuda, triton or numba-cpu")
    source: str = Field(description="the kernel's source text")
    cell: str | None = Field(default=None, description="the book's kernel-cell id, if any")
    launch: LaunchOverride | None = Field(default=None, description="launch override formulas")
    requires: str | None = Field(
        default=None,
        pattern=r"^sm\d{2,3}[a-z]?$",
        description="distributed mode: a compute capability the run needs, e.g. sm90",
    )
    device: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,63}$",
        description="distributed mode: a device model to run on, e.g. H200",
    )


class RunCreated(BaseModel):
    id: str
    state: str
    detail: str | None
    queue_position: int | None
    url: str


class RunSummary(BaseModel):
    id: str
    created_at: datetime
    finished_at: datetime | None
    problem: str
    backend: str
    cell: str | None
    state: str
    detail: str | None
    median_us: float | None = None
    percent_of_roofline: float | None = None

    @classmethod
    def of(cls, run: Run) -> RunSummary:
        result = parse_result(run)
        timing = result.timing if result else None
        roof = result.roofline if result else None
        return cls(
            id=run.id,
            created_at=run.created_at,
            finished_at=run.finished_at,
            problem=run.problem,
            backend=run.backend,
            cell=run.cell_id,
            state=run.state,
            detail=run.detail,
            median_us=timing.median_us if timing and timing.timed else None,
            percent_of_roofline=roof.percent_of_roofline if roof else None,
        )


class RunOut(RunSummary):
    started_at: datetime | None
    chapter: str | None
    user: str
    source: str
    launch: dict[str, Any] | None
    queue_position: int | None
    result: dict[str, Any] | None

    @classmethod
    def full(cls, run: Run, queue_position: int | None) -> RunOut:
        base = RunSummary.of(run).model_dump()
        return cls(
            **base,
            started_at=run.started_at,
            chapter=run.chapter,
            user=run.user,
            source=run.source,
            launch=run.launch,
            queue_position=queue_position,
            result=run.result,
        )


class ProblemSummary(BaseModel):
    slug: str
    title: str
    summary: str
    backends: list[str]
    tags: list[str]
    exercise: bool
