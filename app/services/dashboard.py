"""The instructor's dashboard of a cohort: its roster, and every run its learners made on the
exercises of its assignments, folded per learner and exercise.

A cohort's state is read once in full (one query over its learners' runs of its exercises,
which reads the few result fields the state needs, and only from finished runs that passed),
then kept in memory and moved forward: each live update asks only for the runs changed since
the state's cursor (one query, on the index over runs(user, updated_at)) and refolds the
cells those runs belong to. A cursor is the newest `updated_at` seen; the query reaches a few
seconds behind it (`OVERLAP`), since a run written in a transaction that committed late can
carry an older time, and a run read twice changes nothing.

A page's own cursor is the server's time when it asked; an update sends the cells this
process refolded after that time less `OVERLAP` (another process may have taken a run in a
moment earlier than this one did), so a change may come twice, never not at all.

The roster (members, assignments) is read on every request, three small queries: a learner
who joins or an assignment that changes its exercises starts the state afresh.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, case, select

from kplay.app.db.classroom import Assignment, Cohort, CohortMember
from kplay.app.db.models import Run, User
from kplay.app.db.session import Database
from kplay.app.services.accounts import owner_key
from kplay.app.services.progress import CORRECT, RUNNING, UNTRIED, WRONG, Outcome, _number
from kplay.app.services.records import is_final
from kplay.kernels.problem import ProblemSpec, Tier

OVERLAP = timedelta(seconds=5)
CACHED_COHORTS = 16  # states kept per process; the least recently shown goes first
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class NotFound(LookupError):
    """No such cohort for this viewer (answered as 404, whether it exists or not)."""


@dataclass(frozen=True)
class Learner:
    user_id: int
    owner: str  # the name the learner's runs are stored under
    name: str
    email: str


@dataclass(frozen=True)
class AssignmentInfo:
    id: int
    title: str
    exercises: tuple[str, ...]
    deadline: datetime


@dataclass(frozen=True)
class Roster:
    cohort_id: int
    name: str
    learners: tuple[Learner, ...]
    instructors: frozenset[int]
    assignments: tuple[AssignmentInfo, ...]

    @property
    def exercises(self) -> tuple[str, ...]:
        """Every exercise of the cohort's assignments, once each, in the assignments' order."""
        return tuple(dict.fromkeys(e for a in self.assignments for e in a.exercises))

    @property
    def key(self) -> tuple[Any, ...]:
        return (tuple(x.owner for x in self.learners), self.exercises)

    def learner(self, user_id: int) -> Learner | None:
        return next((x for x in self.learners if x.user_id == user_id), None)


def roster(db: Database, cohort_id: int) -> Roster:
    """The cohort's learners, instructors and assignments; NotFound when there is none."""
    with db.session() as s:
        cohort = s.get(Cohort, cohort_id)
        if cohort is None:
            raise NotFound(f"no cohort {cohort_id}")
        members = s.execute(
            select(CohortMember.user_id, CohortMember.role, User.display_name, User.email)
            .join(User, User.id == CohortMember.user_id)
            .where(CohortMember.cohort_id == cohort_id)
            .order_by(User.display_name, User.id)
        ).all()
        work = s.execute(
            select(Assignment.id, Assignment.title, Assignment.exercises, Assignment.deadline)
            .where(Assignment.cohort_id == cohort_id)
            .order_by(Assignment.created_at, Assignment.id)
        ).all()
        name = cohort.name
    learners = tuple(
        Learner(uid, owner_key(uid), shown, email)
        for uid, role, shown, email in members
        if role == "learner"
    )
    instructors = frozenset(uid for uid, role, _n, _e in members if role == "instructor")
    assignments = tuple(
        AssignmentInfo(aid, title, tuple(str(e) for e in (exercises or [])), deadline)
        for aid, title, exercises, deadline in work
    )
    return Roster(cohort_id, name, learners, instructors, assignments)


def may_watch(roster: Roster, viewer: Any) -> bool:
    """Instructors of this cohort and admins; no one else (not even its learners)."""
    role = getattr(viewer, "role", None)
    account = getattr(viewer, "account_id", None)
    if account is None:
        return False
    return role == "admin" or account in roster.instructors


@dataclass(frozen=True)
class RunFact:
    """One run, as far as the dashboard goes."""

    id: str
    user: str
    cell: str
    problem: str
    state: str
    created_at: datetime
    updated_at: datetime
    detail: str | None
    check_ok: bool
    percent: float | None
    speedup: float | None
    median_us: float | None

    @property
    def outcome(self) -> Outcome:
        return Outcome(
            self.cell, self.problem, self.state, self.check_ok, self.percent, self.speedup
        )

    @property
    def failed(self) -> bool:
        """Finished without a correct answer."""
        return is_final(self.state) and not (self.state == "done" and self.check_ok)


def _columns() -> list[Any]:
    # Result fields are read from finished runs that passed only: the others need none, and
    # each extraction parses the stored JSON again.
    done = Run.state == "done"
    r = Run.result
    return [
        Run.id,
        Run.user,
        Run.cell_id,
        Run.problem,
        Run.state,
        Run.created_at,
        Run.updated_at,
        Run.detail,
        case((done, r[("check", "ok")]), else_=None),
        case((done, r[("roofline", "percent_of_roofline")]), else_=None),
        case((done, r[("roofline", "speedup_over_baseline")]), else_=None),
        case((done, r[("timing", "median_us")]), else_=None),
    ]


def _facts(rows: Iterable[Any]) -> list[RunFact]:
    out = []
    for rid, user, cell, problem, state, created, updated, detail, ok, pct, sp, med in rows:
        # SQLite's JSON_EXTRACT reads a JSON true as 1; PostgreSQL gives True.
        out.append(
            RunFact(
                rid,
                user,
                cell,
                problem,
                state,
                created,
                updated,
                detail,
                ok in (True, 1),
                _number(pct),
                _number(sp),
                _number(med),
            )
        )
    return out


def fetch_runs(
    db: Database, owners: Iterable[str], exercises: Iterable[str], since: datetime | None = None
) -> list[RunFact]:
    """The runs of `owners` on `exercises` (profile runs aside), changed after `since` if
    given: one query."""
    owners, exercises = list(owners), list(exercises)
    if not owners or not exercises:
        return []
    where = [Run.user.in_(owners), Run.cell_id.in_(exercises), Run.profile_of.is_(None)]
    if since is not None:
        where.append(Run.updated_at > since)
    with db.session() as s:
        return _facts(s.execute(select(*_columns()).where(and_(*where))).all())


@dataclass
class Cell:
    """One learner on one exercise."""

    rank: int = UNTRIED
    tier: Tier | None = None
    runs: int = 0
    failed: int = 0
    first_at: datetime | None = None
    last_at: datetime | None = None
    changed_at: datetime = EPOCH  # the newest updated_at of its runs
    best_us: float | None = None
    # The latest moment its rank rose (the first run that reached its best rank).
    progressed_at: datetime | None = None
    # When this process learned of its last change: a live update sends the cells seen after
    # the page's cursor. Read in full, a cell counts as seen when its runs changed.
    seen_at: datetime = EPOCH

    @property
    def key(self) -> str:
        if self.tier is not None:
            return "tier"
        return {UNTRIED: "untried", RUNNING: "running", WRONG: "wrong", CORRECT: "correct"}[
            self.rank
        ]


UNTOUCHED = Cell()


def fold_cell(facts: Iterable[RunFact], problem_of: Mapping[str, ProblemSpec]) -> Cell:
    """A cell from its runs: the best run's rank and tier, counts, times."""
    cell = Cell()
    best: tuple[int, int] = (UNTRIED, -1)
    for f in sorted(facts, key=lambda f: (f.created_at, f.id)):
        cell.runs += 1
        cell.failed += f.failed
        cell.first_at = cell.first_at or f.created_at
        cell.last_at = f.created_at
        cell.changed_at = max(cell.changed_at, f.updated_at)
        rank, place, tier = f.outcome.rank(problem_of.get(f.problem))
        if (rank, place) > best:
            best, cell.rank, cell.tier, cell.progressed_at = (rank, place), rank, tier, f.created_at
        if f.state == "done" and f.check_ok and f.median_us is not None:
            cell.best_us = f.median_us if cell.best_us is None else min(cell.best_us, f.median_us)
    return cell


@dataclass
class CohortState:
    """A cohort's runs and cells, as of `cursor`."""

    key: tuple[Any, ...]
    cursor: datetime = EPOCH
    facts: dict[tuple[str, str], dict[str, RunFact]] = field(default_factory=dict)
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def absorb(
        self, found: list[RunFact], problem_of: Mapping[str, ProblemSpec], full: bool = False
    ) -> int:
        """Take runs in; refold the cells whose runs changed. Returns how many cells did."""
        now = datetime.now(UTC)
        touched = set()
        for f in found:
            pair = (f.user, f.cell)
            runs = self.facts.setdefault(pair, {})
            if runs.get(f.id) != f:
                runs[f.id] = f
                touched.add(pair)
            if f.updated_at > self.cursor:
                self.cursor = f.updated_at
        for pair in touched:
            cell = self.cells[pair] = fold_cell(self.facts[pair].values(), problem_of)
            cell.seen_at = cell.changed_at if full else now
        return len(touched)

    def cell(self, owner: str, exercise: str) -> Cell:
        return self.cells.get((owner, exercise), UNTOUCHED)

    def all_facts(self) -> Iterable[RunFact]:
        for runs in self.facts.values():
            yield from runs.values()


class Dashboards:
    """The states of the cohorts lately shown, in this process."""

    def __init__(self, limit: int = CACHED_COHORTS) -> None:
        self.limit = limit
        self._states: OrderedDict[int, CohortState] = OrderedDict()
        self._lock = threading.Lock()

    def state(
        self, db: Database, found: Roster, problem_of: Mapping[str, ProblemSpec]
    ) -> CohortState:
        """The cohort's state, read in full the first time (or when its roster changed) and
        moved forward since its cursor otherwise."""
        with self._lock:
            state = self._states.get(found.cohort_id)
            if state is None or state.key != found.key:
                state = self._states[found.cohort_id] = CohortState(found.key)
            self._states.move_to_end(found.cohort_id)
            while len(self._states) > self.limit:
                self._states.popitem(last=False)
        owners = [x.owner for x in found.learners]
        with state.lock:
            full = state.cursor == EPOCH
            since = None if full else state.cursor - OVERLAP
            state.absorb(fetch_runs(db, owners, found.exercises, since), problem_of, full)
        return state
