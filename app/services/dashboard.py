"""The instructor's dashboard of a cohort: every learner's state on every exercise of the
cohort's assignments, kept in memory per cohort and moved forward as runs change.

A first read aggregates in the database (counts, times and failed runs per learner and
exercise and per verdict message: no stored result is read); the tiers and best times need
the results of the correct runs, and a thread reads them after the first page is out, so
they reach that page with its next update. Each later request asks which pairs had runs
changed since the state's cursor (one query on the index over runs(user, updated_at)) and
reads only those pairs again, results included. The query reaches `OVERLAP` behind the
cursor, since a run written in a transaction that committed late can carry an older time.

A page's own cursor is the server's time when it asked; an update sends the cells this
process took in after that time less `OVERLAP` (another process may have taken a run in a
moment earlier than this one did), so a change may come twice, never not at all.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select

from kplay.app.db.models import Run
from kplay.app.db.session import Database
from kplay.app.services.dashboard_roster import Roster
from kplay.app.services.progress import (
    CORRECT,
    RUNNING,
    TIER,
    UNTRIED,
    WRONG,
    Outcome,
    _number,
)
from kplay.kernels.models import FINAL_STATES, RunState
from kplay.kernels.problem import ProblemSpec, Tier

log = logging.getLogger(__name__)

OVERLAP = timedelta(seconds=5)
CACHED_COHORTS = 16  # states kept per process; the least recently shown goes first
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
    db: Database, owners: list[str], exercises: list[str], pairs: Iterable[Pair] | None = None
) -> dict[Pair, Cell]:
    """Every learner-exercise pair's counts and times, aggregated by the database: no run's
    result is read. A pair's rank here stops at correct; its tier comes from `read_tiers`."""
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
    groups = (
        select(Run.user, Run.cell_id, Run.state, Run.detail, func.count(), func.max(Run.created_at))
        .where(*_scope(owners, exercises, pairs), failed)
        .group_by(Run.user, Run.cell_id, Run.state, Run.detail)
    )
    wanted = None if pairs is None else set(pairs)
    cells: dict[Pair, Cell] = {}
    with db.session() as s:
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
        for user, cell_id, state, detail, count, latest in s.execute(groups):
            cell = cells.get((user, cell_id))
            if cell is not None:
                cell.failures[(state, detail)] = (count, latest)
    return cells


def read_tiers(
    db: Database,
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
    with db.session() as s:
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


@dataclass
class CohortState:
    """A cohort's cells, as of `cursor`. `tiers_ready` turns true once the tiers and best
    times of the first full read are in (read after the first page, see `Dashboards`)."""

    key: tuple[Any, ...]
    cursor: datetime = EPOCH
    cells: dict[Pair, Cell] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    loaded: bool = False
    tiers_ready: bool = False
    recent: dict[str, datetime] = field(default_factory=dict)  # run id: updated_at, lately
    version: int = 0  # one more at each change: what `memo` keys its entries by
    memo: dict[str, tuple[int, Any]] = field(default_factory=dict)

    def put(self, found: Mapping[Pair, Cell], when: datetime | None) -> None:
        """Take cells in, marked seen at `when` (None: when their runs changed)."""
        for pair, cell in found.items():
            cell.seen_at = cell.changed_at if when is None else when
            self.cells[pair] = cell
            if cell.changed_at > self.cursor:
                self.cursor = cell.changed_at
        if found:
            self.version += 1

    def cell(self, owner: str, exercise: str) -> Cell:
        return self.cells.get((owner, exercise), UNTOUCHED)

    def remember(self, name: str, make: Any) -> Any:
        """`make()`, computed once per version of the state."""
        had = self.memo.get(name)
        if had is not None and had[0] == self.version:
            return had[1]
        value = make()
        self.memo[name] = (self.version, value)
        return value


class Dashboards:
    """The states of the cohorts lately shown, in this process."""

    def __init__(self, limit: int = CACHED_COHORTS) -> None:
        self.limit = limit
        self._states: OrderedDict[int, CohortState] = OrderedDict()
        self._lock = threading.Lock()

    def state(
        self,
        db: Database,
        found: Roster,
        catalog: Mapping[str, ProblemSpec],
        wait_for_tiers: bool = False,
    ) -> CohortState:
        """The cohort's state: read in full the first time (or when its roster changed), and
        moved forward since its cursor otherwise.

        A full read takes the counts at once and reads the tiers and best times (the stored
        results of every correct run) in a thread of its own, unless `wait_for_tiers`; the
        cells it changes reach the page with its next update.
        """
        with self._lock:
            state = self._states.get(found.cohort_id)
            if state is None or state.key != found.key:
                state = self._states[found.cohort_id] = CohortState(found.key)
            self._states.move_to_end(found.cohort_id)
            while len(self._states) > self.limit:
                self._states.popitem(last=False)
        owners, exercises = [x.owner for x in found.learners], list(found.exercises)
        first = False
        with state.lock:
            if not state.loaded:
                state.loaded = first = True
                state.put(read_cells(db, owners, exercises), None)
            else:
                self._advance(db, state, owners, exercises, catalog)
        if first and wait_for_tiers:
            self._tiers(db, state, owners, exercises, catalog)
        elif first:
            threading.Thread(
                target=self._tiers,
                args=(db, state, owners, exercises, catalog),
                name=f"dashboard-tiers-{found.cohort_id}",
                daemon=True,
            ).start()
        return state

    @staticmethod
    def _tiers(
        db: Database,
        state: CohortState,
        owners: list[str],
        exercises: list[str],
        catalog: Mapping[str, ProblemSpec],
    ) -> None:
        with state.lock:
            correct = {p: c for p, c in state.cells.items() if c.done}
        with_tiers = {p: _copy(c) for p, c in correct.items()}
        try:
            read_tiers(db, owners, exercises, with_tiers, catalog)
        except Exception:  # noqa: BLE001 - the database went away (a stop): read again later
            log.warning("the dashboard could not read tiers; the next page reads again")
            with state.lock:
                state.loaded = False
                state.cells.clear()
            return
        with state.lock:
            now = datetime.now(UTC)
            for pair, cell in with_tiers.items():
                # A pair refreshed since by an update carries its own tier already.
                old = correct[pair]
                if state.cells.get(pair) is old and _differs(old, cell):
                    cell.seen_at = now
                    state.cells[pair] = cell
            state.tiers_ready = True
            state.version += 1

    @staticmethod
    def _advance(
        db: Database,
        state: CohortState,
        owners: list[str],
        exercises: list[str],
        catalog: Mapping[str, ProblemSpec],
    ) -> None:
        """The pairs with runs changed since the cursor (one query on runs(user,
        updated_at)), read again in full."""
        since = state.cursor - OVERLAP
        stmt = select(Run.id, Run.user, Run.cell_id, Run.updated_at).where(
            Run.user.in_(owners), Run.updated_at > since, Run.cell_id.in_(exercises)
        )
        with db.session() as s:
            rows = s.execute(stmt).all()
        # Runs read again for the overlap are taken once per version of theirs.
        state.recent = {k: at for k, at in state.recent.items() if at > since}
        pairs = sorted({(u, c) for rid, u, c, at in rows if state.recent.get(rid) != at})
        state.recent.update((rid, at) for rid, _u, _c, at in rows)
        if not pairs:
            return
        fresh = read_cells(db, owners, exercises, pairs)
        read_tiers(db, owners, exercises, fresh, catalog, pairs)
        now = datetime.now(UTC)
        changed = {p: c for p, c in fresh.items() if _differs(state.cells.get(p), c)}
        state.put(changed, now)


def _copy(cell: Cell) -> Cell:
    return dataclasses.replace(cell, failures=dict(cell.failures))


def _differs(old: Cell | None, new: Cell) -> bool:
    if old is None:
        return True
    keep = ("seen_at",)
    return any(
        getattr(old, f.name) != getattr(new, f.name)
        for f in dataclasses.fields(Cell)
        if f.name not in keep
    )
