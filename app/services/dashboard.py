"""The instructor's dashboard of a cohort: every learner's state on every exercise of the
cohort's assignments, kept in memory per cohort and moved forward as runs change.

A first read takes each learner-exercise pair's row of `dashboard_cells` (its finished runs'
counts, times, tier, best time and failures, kept by each verdict's transaction: see
app/services/dashboard_cells.py) plus the runs still going; no run's result is read. The
failed runs by message follow from a thread, so they reach the first page with its next
update. Each later request asks which pairs had runs changed since the state's cursor (one
query on the index over runs(user, updated_at)) and reads only those pairs' rows again. The
query reaches `OVERLAP` behind the cursor, since a run written in a transaction that
committed late can carry an older time.

A page's own cursor is the server's time when it asked; an update sends the cells this
process took in after that time less `OVERLAP` (another process may have taken a run in a
moment earlier than this one did), so a change may come twice, never not at all.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from sqlalchemy import select

from kplay.app.db.models import Run
from kplay.app.db.session import Database
from kplay.app.services.dashboard_cells import among, read_cells, read_failures, snapshot
from kplay.app.services.dashboard_reads import EPOCH, UNTOUCHED, Cell, Pair
from kplay.app.services.dashboard_roster import Roster
from kplay.kernels.problem import ProblemSpec

log = logging.getLogger(__name__)

OVERLAP = timedelta(seconds=5)
CACHED_COHORTS = 16  # states kept per process; the least recently shown goes first


_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{8,}\b")
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_PATH = re.compile(r"(?:[\w.-]*/)+[\w.-]+")
_SPACE = re.compile(r"\s+")


@lru_cache(maxsize=65536)
def normalise(message: str) -> str:
    """A verdict's message with what varies from run to run taken out: quoted names and
    values become '…', paths <path>, hex ids and numbers #."""
    text = _QUOTED.sub("'…'", message)
    text = _PATH.sub("<path>", text)
    text = _HEX.sub("#", text)
    text = _NUMBER.sub("#", text)
    return _SPACE.sub(" ", text).strip()


@dataclass
class Group:
    """Failed runs of one state whose messages read the same once normalised."""

    count: int = 0
    owners: dict[str, int] = field(default_factory=dict)  # failed runs per learner
    latest: datetime | None = None
    example: str = ""


@dataclass
class CohortState:
    """A cohort's cells, as of `cursor`. `failures_ready` turns true once the failed runs by
    message of the first full read are in (read after the first page, see `Dashboards`)."""

    key: tuple[Any, ...]
    cursor: datetime = EPOCH
    cells: dict[Pair, Cell] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    loaded: bool = False
    failures_ready: bool = False
    recent: dict[str, datetime] = field(default_factory=dict)  # run id: updated_at, lately
    groups: dict[tuple[str, str], Group] | None = None
    version: int = 0  # one more at each change: what `memo` keys its entries by
    best_version: int = 0  # one more at each change of a best time
    memo: dict[str, tuple[int, Any]] = field(default_factory=dict)
    pending: tuple[Any, ...] | None = None  # what `Dashboards.follow` reads the failures with

    def put(self, found: Mapping[Pair, Cell], when: datetime | None) -> None:
        """Take cells in, marked seen at `when` (None: when their runs changed)."""
        for pair, cell in found.items():
            cell.seen_at = cell.changed_at if when is None else when
            if self.groups is not None:
                self._regroup(pair[0], self.cells.get(pair), -1)
                self._regroup(pair[0], cell, 1)
            if self.cells.get(pair, UNTOUCHED).best_us != cell.best_us:
                self.best_version += 1
            self.cells[pair] = cell
            if cell.changed_at > self.cursor:
                self.cursor = cell.changed_at
        if found:
            self.version += 1

    def cell(self, owner: str, exercise: str) -> Cell:
        return self.cells.get((owner, exercise), UNTOUCHED)

    def failure_groups(self) -> dict[tuple[str, str], Group]:
        """Failed runs by state and normalised message; gathered once, then kept current
        by `put`."""
        if self.groups is None:
            self.groups = {}
            for (owner, _ex), cell in self.cells.items():
                self._regroup(owner, cell, 1)
        return self.groups

    def _regroup(self, owner: str, cell: Cell | None, sign: int) -> None:
        assert self.groups is not None
        for (run_state, message), (count, latest) in (cell.failures if cell else {}).items():
            text = message or "(no message)"
            key = (run_state, normalise(text))
            group = self.groups.setdefault(key, Group())
            group.count += sign * count
            mine = group.owners.get(owner, 0) + sign * count
            if mine > 0:
                group.owners[owner] = mine
            else:
                group.owners.pop(owner, None)
            # Failures are only ever added: the latest one only moves on.
            if sign > 0 and (group.latest is None or latest > group.latest):
                group.latest, group.example = latest, text
            if group.count <= 0:
                del self.groups[key]

    def remember(self, name: str, make: Any, version: int | None = None) -> Any:
        """`make()`, computed once per version of the state (or the `version` given)."""
        version = self.version if version is None else version
        had = self.memo.get(name)
        if had is not None and had[0] == version:
            return had[1]
        value = make()
        self.memo[name] = (version, value)
        return value


class Dashboards:
    """The states of the cohorts lately shown, in this process."""

    def __init__(self, limit: int = CACHED_COHORTS) -> None:
        self.limit = limit
        self._states: OrderedDict[int, CohortState] = OrderedDict()
        self._lock = threading.Lock()

    def peek(self, cohort_id: int) -> CohortState | None:
        """The cohort's state if this process keeps one; nothing is read."""
        with self._lock:
            return self._states.get(cohort_id)

    def state(
        self,
        db: Database,
        found: Roster,
        catalog: Mapping[str, ProblemSpec],
        wait: bool = False,
    ) -> CohortState:
        """The cohort's state: read in full the first time (or when its roster changed), and
        moved forward since its cursor otherwise.

        A full read takes the cells at once, tiers and best times included; their failed
        runs by message are read at once when `wait`, else by a thread that `follow` starts
        (a page calls it once it is made, so that the thread does not slow it down; the
        next call here starts it otherwise). The cells it changes reach the page with its
        next update."""
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
                with db.session() as s:
                    snapshot(s)
                    state.put(read_cells(s, owners, exercises, catalog, failures=False), None)
            else:
                self._advance(db, state, owners, exercises, catalog)
        if first and wait:
            self._failures(db, owners, exercises, state)
        elif first:
            state.pending = (db, owners, exercises)
        else:
            self.follow(state)
        return state

    def follow(self, state: CohortState) -> None:
        """Start reading the failures of a first full read, if they are still to be read."""
        with state.lock:
            pending, state.pending = state.pending, None
        if pending is not None:
            threading.Thread(
                target=self._failures, args=(*pending, state), name="dashboard-failures",
                daemon=True,
            ).start()  # fmt: skip

    @staticmethod
    def _failures(
        db: Database, owners: list[str], exercises: list[str], state: CohortState
    ) -> None:
        """The failed runs by message of the first full read, into the cells no update has
        read again since (an update reads them with their failures)."""
        with state.lock:
            before = dict(state.cells)
        try:
            with db.session() as s:
                found = read_failures(s, owners, exercises)
        except Exception:  # noqa: BLE001 - the database went away (a stop): read again later
            log.warning("the dashboard could not read failures; the next page reads again")
            with state.lock:
                state.loaded = False
                state.cells.clear()
            return
        with state.lock:
            state.put(
                {
                    pair: dataclasses.replace(cell, failures=found[pair])
                    for pair, cell in before.items()
                    if pair in found and state.cells.get(pair) is cell
                },
                datetime.now(UTC),
            )
            state.failures_ready = True
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
        updated_at)), read again."""
        since = state.cursor - OVERLAP
        with db.session() as s:
            snapshot(s)
            stmt = select(Run.id, Run.user, Run.cell_id, Run.updated_at).where(
                among(s, Run.user, owners), Run.updated_at > since, Run.cell_id.in_(exercises)
            )
            rows = s.execute(stmt).all()
            # Runs read again for the overlap are taken once per version of theirs.
            state.recent = {k: at for k, at in state.recent.items() if at > since}
            pairs = sorted({(u, c) for rid, u, c, at in rows if state.recent.get(rid) != at})
            if not pairs:
                return
            fresh = read_cells(s, owners, exercises, catalog, pairs)
        state.recent.update((rid, at) for rid, _u, _c, at in rows)
        now = datetime.now(UTC)
        changed = {p: c for p, c in fresh.items() if _differs(state.cells.get(p), c)}
        state.put(changed, now)


def _differs(old: Cell | None, new: Cell) -> bool:
    if old is None:
        return True
    keep = ("seen_at",)
    return any(
        getattr(old, f.name) != getattr(new, f.name)
        for f in dataclasses.fields(Cell)
        if f.name not in keep
    )
