"""Creating, reading and listing runs: the one path shared by the pages and the JSON API."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import func, select

from kplay.app.book import Book, CellSpec
from kplay.app.db.models import ProfileReport, Run
from kplay.app.db.session import Database
from kplay.app.services import records
from kplay.app.services.access import can_read
from kplay.app.services.launch_input import LaunchInputError, check_override
from kplay.config import Settings
from kplay.kernels.launch import requested_arch
from kplay.kernels.models import GradingCase, LaunchOverride, RunJob, RunState
from kplay.kernels.names import unknown
from kplay.kernels.problem import ProblemSpec
from kplay.workers.executor import Executor, SubmitRefused

log = logging.getLogger(__name__)

# A run's id is its job's: a uuid4 in hex.
RUN_ID = re.compile(r"[0-9a-f]{32}")


class RunInputError(Exception):
    """A request the service refuses; `status` is the HTTP status that fits it."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class RunNotFound(KeyError):
    pass


@dataclass(frozen=True)
class RunRequest:
    problem: str
    backend: str
    source: str
    cell: str | None = None
    launch: LaunchOverride | None = None
    requires: str | None = None
    device: str | None = None


class RunService:
    def __init__(
        self,
        db: Database,
        executor: Executor,
        catalog: Mapping[str, ProblemSpec],
        book: Book,
        settings: Settings,
    ) -> None:
        self.db = db
        self.executor = executor
        self.catalog = catalog
        self.book = book
        self.settings = settings
        # Counting a user's runs in flight and storing a new one happen under one lock, so two
        # requests at once cannot both pass the cap (one web process; the distributed
        # executor also enforces the cap in Redis, across processes).
        self._admit = threading.Lock()
        # Every job gets the model's cap on its timing loop; the card's timing bar reads it.
        self.timing_cap_s: float = RunJob.model_fields["timing_cap_s"].default

    # ------------------------------------------------------------ create

    def validate(self, req: RunRequest) -> tuple[ProblemSpec, CellSpec | None]:
        problem = self.catalog.get(req.problem)
        if problem is None:
            raise RunInputError(422, unknown("problem", req.problem, self.catalog))
        cell = None
        if req.cell is not None:
            try:
                cell = self.book.cell(req.cell)
            except KeyError:
                raise RunInputError(
                    422, f"unknown cell {req.cell!r}: no such kernel cell"
                ) from None
            if cell.problem != problem.slug:
                raise RunInputError(
                    422, f"cell {cell.id!r} is for problem {cell.problem!r}, not {problem.slug!r}"
                )
        offered = cell.backends if cell else tuple(problem.backends)
        if req.backend not in offered:
            where = f"cell {cell.id!r}" if cell else f"problem {problem.slug!r}"
            raise RunInputError(
                422, f"backend {req.backend!r} is not offered by {where}; use {', '.join(offered)}"
            )
        size = len(req.source.encode("utf-8"))
        if size > self.settings.max_source_bytes:
            raise RunInputError(
                413,
                f"source is {size} bytes; the limit is {self.settings.max_source_bytes} bytes",
            )
        if not req.source.strip():
            raise RunInputError(422, "source is empty: write a kernel first")
        if "\x00" in req.source:
            line = req.source.count("\n", 0, req.source.index("\x00")) + 1
            raise RunInputError(
                422, f"source contains a NUL character (line {line}); no compiler accepts one"
            )
        try:
            check_override(problem, req.backend, req.source, req.launch)
        except LaunchInputError as exc:
            text = str(exc)
            raise RunInputError(
                422, text if text.startswith("launch") else f"launch: {text}"
            ) from None
        return problem, cell

    def create(
        self,
        req: RunRequest,
        user: str,
        secret_seed: int | None = None,
        attempt: bool = True,
        predicted: bool = False,
        hidden_cases: list[GradingCase] | None = None,
    ) -> Run:
        """Store the run (queued), then hand it over. The row exists before any worker sees it.

        A grading run (app/services/grading.py) passes the assignment's `secret_seed`, which
        the checker's inputs derive from, its exercise's `hidden_cases` (checked after the
        problem's own; app/services/gradingcases.py), and `attempt=False`: it is no attempt of
        the cell, so its row names none. An attempt of a "predict, then run" cell comes only through
        its stored prediction (app/services/exercisekinds.py passes `predicted=True`)."""
        problem, cell = self.validate(req)
        if attempt and not predicted and cell is not None:
            refuse_unpredicted(cell)
        job = RunJob(
            problem=problem.slug,
            backend=req.backend,
            source=req.source,
            cell=req.cell,
            launch=req.launch,
            user=user,
            requires=req.requires or _arch_requirement(req.backend, req.source),
            device=req.device,
            secret_seed=secret_seed,
            hidden_cases=hidden_cases or [],
            timing_cap_s=self.timing_cap_s,
        )
        run = Run(
            id=job.job_id,
            user=user,
            cell_id=req.cell if attempt else None,
            chapter=(cell.chapter or None) if cell else None,  # none for a catalog cell
            problem=problem.slug,
            backend=req.backend,
            source=req.source,
            launch=req.launch.model_dump(mode="json") if req.launch else None,
            state=RunState.queued.value,
            detail="waiting for a worker" if attempt else "waiting for a worker to grade it",
        )
        return self._store_and_submit(run, job, user)

    def profile(self, run_id: str, user: str) -> Run:
        """A profile run of `run_id`: the same kernel again, under Nsight Compute, on a GPU."""
        original = self.visible(run_id, user)
        if original.profile_of is not None:
            raise RunInputError(422, "this run is a profile; ask for one of the run it profiled")
        if original.backend == "numba-cpu":
            raise RunInputError(422, "Nsight Compute profiles GPU kernels; this one ran on the CPU")
        if original.state not in (RunState.done.value, RunState.suspicious.value):
            raise RunInputError(
                409,
                f"a profile needs a run that passed its checks and was timed; this one ended "
                f"{original.state}",
            )
        launch = LaunchOverride.model_validate(original.launch) if original.launch else None
        job = RunJob(
            problem=original.problem,
            backend=original.backend,
            source=original.source,
            cell=original.cell_id,
            mode="profile",
            launch=launch,
            user=user,
            requires=_arch_requirement(original.backend, original.source),
            timing_cap_s=self.timing_cap_s,
        )
        run = Run(
            id=job.job_id,
            user=user,
            cell_id=None,  # not an attempt of the cell: the cell's history stays the learner's
            chapter=original.chapter,
            problem=original.problem,
            backend=original.backend,
            source=original.source,
            launch=original.launch,
            state=RunState.queued.value,
            detail="waiting for a GPU that takes profiles",
            profile_of=original.id,
        )
        return self._store_and_submit(run, job, user)

    def profiles_of(self, run_id: str, user: str) -> list[Run]:
        """The profile runs of one run, newest first (the viewer's own only)."""
        self.visible(run_id, user)
        stmt = (
            select(Run)
            .where(Run.profile_of == run_id, Run.user == user)
            .order_by(Run.created_at.desc(), Run.id.desc())
            .limit(10)
        )
        with self.db.session() as s:
            return list(s.scalars(stmt))

    def report(self, run_id: str, user: str) -> bytes:
        """A profile run's `.ncu-rep`; RunNotFound where there is none to see."""
        self.visible(run_id, user)
        with self.db.session() as s:
            row = s.get(ProfileReport, run_id)
        if row is None:
            raise RunNotFound(f"run {run_id!r} has no Nsight Compute report")
        return row.data

    def _store_and_submit(self, run: Run, job: RunJob, user: str) -> Run:
        with self._admit:
            self._check_cap(user)
            with self.db.session() as s:
                s.add(run)
        try:
            self.executor.submit(job)
        except SubmitRefused as exc:
            records.finish_synthetic(self.db, run, RunState.rejected, str(exc))
        except Exception as exc:  # noqa: BLE001 - the run must end with a verdict, not hang
            log.exception("submit failed for %s", run.id)
            message = f"could not hand the run to a worker: {type(exc).__name__}: {exc}"
            records.finish_synthetic(self.db, run, RunState.runtime_error, message)
        return self.get(run.id)

    def in_flight(self, user: str) -> int:
        """How many of `user`'s runs are queued or running, by the database."""
        stmt = (
            select(func.count())
            .select_from(Run)
            .where(Run.user == user, Run.state.in_(records.NON_FINAL))
        )
        with self.db.session() as s:
            return int(s.scalar(stmt) or 0)

    def _check_cap(self, user: str) -> None:
        cap = self.settings.user_run_cap
        if not cap:
            return
        active = self.in_flight(user)
        if active >= cap:
            raise RunInputError(
                429,
                f"you already have {active} runs queued or running (the limit is {cap}); "
                "wait for one of them to finish",
            )

    # ------------------------------------------------------------ read

    def get(self, run_id: str) -> Run:
        with self.db.session() as s:
            run = s.get(Run, run_id)
        if run is None:
            raise RunNotFound(f"no run {run_id!r}")
        return run

    def queue_position(self, run: Run) -> int | None:
        if records.is_final(run.state):
            return None
        try:
            return self.executor.queue_position(run.id)
        except Exception:  # noqa: BLE001 - a position is a nicety; the broker may be away
            log.exception("queue_position failed for %s", run.id)
            return None

    def wait_estimate_s(self, run: Run) -> float | None:
        if records.is_final(run.state):
            return None
        try:
            return self.executor.wait_estimate_s(run.id)
        except Exception:  # noqa: BLE001 - an estimate is a nicety, like the position
            log.exception("wait_estimate_s failed for %s", run.id)
            return None

    def visible(self, run_id: str, viewer: str) -> Run:
        """The run, when `viewer` may see it; RunNotFound otherwise, as for no such run."""
        if not RUN_ID.fullmatch(run_id):
            # Not an id this service makes: not looked up (PostgreSQL refuses a NUL in text).
            raise RunNotFound(f"no run {run_id!r}")
        with self.db.session() as s:
            run = s.get(Run, run_id)
        if run is None or not can_read(run, viewer):
            raise RunNotFound(f"no run {run_id!r}")
        return run

    def watch(self, run_id: str, viewer: str) -> tuple[Run, int | None]:
        """The run (if `viewer` may see it) and its queue position; a run nobody works on any
        more is ended here."""
        run = self.visible(run_id, viewer)
        position = self.queue_position(run)
        quiet = records.age_s(run.updated_at)
        if (
            not records.is_final(run.state)
            and position is None
            and quiet > self.settings.stale_after_s
        ):
            message = f"lost: no word from the worker for {quiet:.0f} s; run it again"
            records.finish_synthetic(self.db, run, RunState.runtime_error, message)
            run = self.get(run_id)
        return run, position

    def history(self, cell_id: str, user: str, limit: int | None = None) -> list[Run]:
        """The newest runs of one cell by one user, newest first."""
        stmt = (
            select(Run)
            .where(Run.cell_id == cell_id, Run.user == user)
            .order_by(Run.created_at.desc(), Run.id.desc())
            .limit(limit or self.settings.history_limit)
        )
        with self.db.session() as s:
            return list(s.scalars(stmt))

    def count(self, cell_id: str, user: str) -> int:
        stmt = select(func.count()).select_from(Run).where(Run.cell_id == cell_id, Run.user == user)
        with self.db.session() as s:
            return int(s.scalar(stmt) or 0)

    def latest(self, cell_ids: list[str], user: str) -> dict[str, Run]:
        out: dict[str, Run] = {}
        for cell_id in cell_ids:
            runs = self.history(cell_id, user, limit=1)
            if runs:
                out[cell_id] = runs[0]
        return out


def refuse_unpredicted(cell: CellSpec) -> None:
    """A run of a "predict, then run" cell needs its prediction recorded first."""
    ex = cell.exercise
    if ex is not None and ex.kind == "predict":
        raise RunInputError(
            409,
            f"cell {cell.id!r} is a predict-then-run exercise: record your prediction before "
            f"you run it (POST /api/v1/cells/{cell.id}/predictions, or the prediction field "
            "on the page), then run",
        )


def _arch_requirement(backend: str, source: str) -> str | None:
    """A CUDA C++ cell built for an arch-specific target (`arch=sm_90a`) runs only on that
    compute capability: its job waits for a worker of it (`gpu.sm90`), not for any GPU."""
    if backend != "cuda":
        return None
    arch = requested_arch(source)
    if arch is None or arch[-1] not in "af":
        return None
    return "sm" + arch.removeprefix("sm_")[:-1]
