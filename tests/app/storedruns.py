"""Runs stored the way the app stores them (a row at submit, then `record_result`), with the
times and the result fields the progress and leaderboard tests need."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from kplay.app.db.models import Run
from kplay.app.db.session import Database
from kplay.app.services.records import record_result
from kplay.kernels.models import RunJob, RunResult, RunState, SystemInfo, TimingStage
from tests.app.fakes import correct_result, wrong_result

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
DEVICE = "NVIDIA H200"


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def job(problem: str = "vector_add", backend: str = "cuda", cell: str | None = None) -> RunJob:
    return RunJob(problem=problem, backend=backend, source="// kernel\n", cell=cell)


def verified(j: RunJob, median_us: float, device: str = DEVICE) -> RunResult:
    """A correct, timed run that the engine verified, on `device`."""
    result = correct_result(j, median_us)
    result.system = SystemInfo(kind="gpu", device=device, seeds="secret", seed=None)
    assert result.roofline is not None
    result.roofline = result.roofline.model_copy(update={"device": device})
    result.verified = True
    return result


def unverified(j: RunJob, median_us: float) -> RunResult:
    """Correct and timed, but not verified (no ceilings to judge it by, or public seeds)."""
    result = verified(j, median_us)
    result.verified = False
    return result


def suspicious(j: RunJob, median_us: float) -> RunResult:
    result = verified(j, median_us)
    result.state = RunState.suspicious
    result.verified = False
    result.message = "faster than the device's memory allows"
    return result


def simulated(j: RunJob) -> RunResult:
    result = correct_result(j)
    result.timing = TimingStage(timed=False, untimed_reason="the CUDA simulator is not timed")
    result.roofline = None
    result.system = SystemInfo(kind="simulator", device="Numba CUDA simulator")
    return result


def wrong(j: RunJob) -> RunResult:
    return wrong_result(j)


def store(
    db: Database,
    owner: str,
    result: RunResult,
    created: datetime,
    cell: str | None = None,
    took: timedelta = timedelta(seconds=20),
) -> str:
    """Store `result` as `owner`'s run submitted at `created` and finished `took` later."""
    run_id = result.job_id or uuid.uuid4().hex
    with db.session() as s:
        s.add(
            Run(
                id=run_id,
                created_at=created,
                updated_at=created,
                user=owner,
                cell_id=cell,
                problem=result.problem,
                backend=result.backend,
                source=f"// the source of {owner}\n",
                state="queued",
            )
        )
    record_result(db, result)
    with db.session() as s:
        row = s.get(Run, run_id)
        assert row is not None and row.state == result.state.value
        row.started_at, row.finished_at = created, created + took
    return run_id
