"""The dashboard's reads of the runs table: each learner-exercise pair's counts, times and
failures, aggregated by the database (`read_cells`), and the tiers and best times that only
the correct runs' stored results tell (`read_tiers`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from kplay.app.db.models import Run
from kplay.app.services.progress import CORRECT, RUNNING, TIER, UNTRIED, WRONG, Outcome, _number
from kplay.kernels.models import FINAL_STATES, RunState
from kplay.kernels.problem import ProblemSpec, Tier

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FAILED = tuple(sorted(s.value for s in FINAL_STATES if s is not RunState.done))
FINAL = tuple(sorted(s.value for s in FINAL_STATES))
Pair = tuple[str, str]  # (the learner's owner name, the exercise's cell id)


@dataclass
class Cell:
    """One learner on one exercise."""

    rank: int = UNTRIED
    tier: Tier | None = None
    runs: int = 0
    failed: int = 0
    done: int = 0
    first_at: datetime | None = None
    last_at: datetime | None = None
    changed_at: datetime = EPOCH  # the newest updated_at of its runs
    best_us: float | None = None
    # When its rank last rose: the first run that reached its best rank.
    progressed_at: datetime | None = None
    # When this process learned of its last change (see the module's docstring).
    seen_at: datetime = EPOCH
    # Failed runs by (state, message): how many, and the latest one's time.
    failures: dict[tuple[str, str | None], tuple[int, datetime]] = field(default_factory=dict)

    @property
    def key(self) -> str:
        if self.tier is not None:
            return "tier"
        return {UNTRIED: "untried", RUNNING: "running", WRONG: "wrong", CORRECT: "correct"}[
            self.rank
        ]


UNTOUCHED = Cell()


def _scope(owners: list[str], exercises: list[str], pairs: list[Pair] | None) -> list[Any]:
    """The cohort's runs; of `pairs`' learners and exercises only, when given (the rows of
    other pairs among those are dropped by the caller)."""
    if pairs is not None:
        owners = sorted({u for u, _c in pairs})
        exercises = sorted({c for _u, c in pairs})
    return [Run.user.in_(owners), Run.cell_id.in_(exercises), Run.profile_of.is_(None)]


def read_cells(
    s: Session,
    owners: list[str],
    exercises: list[str],
    pairs: Iterable[Pair] | None = None,
    failures: bool = True,
) -> dict[Pair, Cell]:
    """Every learner-exercise pair's counts and times, aggregated by the database: no run's
    result is read. A pair's rank here stops at correct; its tier comes from `read_tiers`;
    its failed runs by message are read unless `failures` is false (`read_failures`)."""
    if not owners or not exercises:
        return {}
    pairs = None if pairs is None else list(pairs)
    failed, final = Run.state.in_(FAILED), Run.state.in_(FINAL)
    stmt = (
        select(
            Run.user,
            Run.cell_id,
            func.count(),
            func.count().filter(failed),
            func.count().filter(Run.state == "done"),
            func.count().filter(~final),
            func.min(Run.created_at),
            func.max(Run.created_at),
            func.max(Run.updated_at),
            func.min(Run.created_at).filter(failed),
            func.min(Run.created_at).filter(Run.state == "done"),
        )
        .where(*_scope(owners, exercises, pairs))
        .group_by(Run.user, Run.cell_id)
    )
    wanted = None if pairs is None else set(pairs)
    cells: dict[Pair, Cell] = {}
    for (
        user,
        cell_id,
        runs,
        n_failed,
        n_done,
        n_open,
        first,
        last,
        changed,
        first_failed,
        first_done,
    ) in s.execute(stmt):
        if wanted is not None and (user, cell_id) not in wanted:
            continue
        cell = cells[(user, cell_id)] = Cell(
            runs=runs, failed=n_failed, done=n_done, first_at=first, last_at=last,
            changed_at=changed,
        )  # fmt: skip
        if n_done:
            cell.rank, cell.progressed_at = CORRECT, first_done
        elif n_failed:
            cell.rank, cell.progressed_at = WRONG, first_failed
        elif n_open:
            cell.rank, cell.progressed_at = RUNNING, first
    if failures:
        read_failures(s, owners, exercises, cells, pairs)
    return cells


def read_failures(
    s: Session,
    owners: list[str],
    exercises: list[str],
    cells: Mapping[Pair, Cell],
    pairs: list[Pair] | None = None,
) -> None:
    """Each pair's failed runs, by state and message: how many, and the latest one's time."""
    failed = Run.state.in_(FAILED)
    groups = (
        select(Run.user, Run.cell_id, Run.state, Run.detail, func.count(), func.max(Run.created_at))
        .where(*_scope(owners, exercises, pairs), failed)
        .group_by(Run.user, Run.cell_id, Run.state, Run.detail)
    )
    for user, cell_id, state, detail, count, latest in s.execute(groups):
        cell = cells.get((user, cell_id))
        if cell is not None:
            cell.failures[(state, detail)] = (count, latest)


def read_tiers(
    s: Session,
    owners: list[str],
    exercises: list[str],
    cells: Mapping[Pair, Cell],
    catalog: Mapping[str, ProblemSpec],
    pairs: Iterable[Pair] | None = None,
) -> None:
    """Each pair's tier and best kernel time, from its correct runs' results: the one query
    that reads stored results, so only of the runs that passed."""
    if not owners or not exercises:
        return
    pairs = None if pairs is None else list(pairs)
    r = Run.result
    stmt = (
        select(
            Run.user,
            Run.cell_id,
            Run.problem,
            Run.created_at,
            r[("check", "ok")],
            r[("roofline", "percent_of_roofline")],
            r[("roofline", "speedup_over_baseline")],
            r[("timing", "median_us")],
        )
        .where(*_scope(owners, exercises, pairs), Run.state == "done")
        .order_by(Run.created_at, Run.id)
    )
    best: dict[Pair, tuple[int, int]] = {}
    rows = s.execute(stmt).all()
    for user, cell_id, problem, created, ok, pct, speedup, median in rows:
        cell = cells.get((user, cell_id))
        if cell is None:
            continue
        # SQLite's JSON_EXTRACT reads a JSON true as 1; PostgreSQL gives True.
        found = Outcome(cell_id, problem, "done", ok in (True, 1), _number(pct), _number(speedup))
        rank, place, tier = found.rank(catalog.get(problem))
        if rank == TIER and (rank, place) > best.get((user, cell_id), (CORRECT, -1)):
            best[(user, cell_id)] = (rank, place)
            cell.rank, cell.tier, cell.progressed_at = TIER, tier, created
        us = _number(median)
        if rank >= CORRECT and us is not None and us > 0:
            cell.best_us = us if cell.best_us is None else min(cell.best_us, us)
