"""Leaderboards: per exercise, the best verified run of each owner on one device and one
benchmark case, fastest first.

Only verified runs count (`RunResult.verified`: done, timed on real hardware, on secret
seeds, each checked repetition right, within the device's ceilings). A suspicious run, a
simulated one, a run on public seeds and a profile run never appear. Times are only compared
where they were measured alike: the same device (as the run's `system.device` names it) and
the same benchmark case; a backend filter narrows the board further.

Each owner's best run per device, case and backend is picked in the database (a window over
the owner's runs, in one query for every board of the problem), ties going to the earlier
submission; a row shows no run id and no source (a run is its owner's only),
and its name comes from `boardnames.public_names`.

The runs are found through the index on `runs.state` (`state = 'done'`) with the problem
and the result's fields as filters: see docs/progress.md for what an index on
(problem, state) would add.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, cast, func, select
from sqlalchemy.dialects.postgresql import JSONB

from kplay.app import format as fmt
from kplay.app.db.models import Run
from kplay.app.db.session import Database
from kplay.app.services.boardnames import public_names
from kplay.app.services.problems import backend_title
from kplay.app.services.progress import tier_reached
from kplay.kernels.problem import ProblemSpec

# The most rows a board shows; the viewer's own row is added below them when it is further.
BOARD_LIMIT = 100


@dataclass(frozen=True)
class Choice:
    """One board that has entries: a device and a benchmark case."""

    device: str
    case: str
    entrants: int
    backends: tuple[str, ...]


@dataclass(frozen=True)
class BoardRow:
    rank: int
    name: str
    backend: str
    backend_title: str
    median_us: float
    time: str
    percent_of_roofline: float | None
    tier: str | None
    submitted_at: datetime
    mine: bool = False

    def public(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "name": self.name,
            "backend": self.backend,
            "median_us": self.median_us,
            "percent_of_roofline": self.percent_of_roofline,
            "tier": self.tier,
            "submitted_at": fmt.iso(self.submitted_at),
            "mine": self.mine,
        }


@dataclass(frozen=True)
class Board:
    problem: str
    title: str
    device: str | None
    case: str | None
    backend: str | None
    choices: list[Choice]
    rows: list[BoardRow] = field(default_factory=list)
    entrants: int = 0
    # A cohort's board (?cohort=<id>): its members' runs only.
    cohort: int | None = None
    cohort_name: str | None = None

    @property
    def backends(self) -> tuple[str, ...]:
        chosen = next(
            (c for c in self.choices if (c.device, c.case) == (self.device, self.case)), None
        )
        return chosen.backends if chosen else ()

    def public(self) -> dict[str, Any]:
        return {
            "problem": self.problem,
            "device": self.device,
            "case": self.case,
            "backend": self.backend,
            "cohort": self.cohort,
            "entrants": self.entrants,
            "boards": [
                {
                    "device": c.device,
                    "case": c.case,
                    "entrants": c.entrants,
                    "backends": list(c.backends),
                }
                for c in self.choices
            ],
            "rows": [r.public() for r in self.rows],
        }


def _counted(slug: str, owners: Collection[str] | None = None) -> list[ColumnElement[bool]]:
    """The rows a board looks at: `slug`'s done runs, profile runs aside (`state` is indexed),
    of `owners` only where given (a cohort's board); which of them are verified and timed is
    read from their results."""
    where = [Run.state == "done", Run.problem == slug, Run.profile_of.is_(None)]
    if owners is not None:
        where.append(Run.user.in_(list(owners)))
    return where


@dataclass(frozen=True)
class _Best:
    """One owner's best verified run on one device, case and backend."""

    device: str
    case: str
    backend: str
    owner: str
    median: float
    created_at: datetime
    run_id: str  # the last tie-break only; never leaves this module
    percent: float | None
    speedup: float | None

    @property
    def order(self) -> tuple[float, datetime, str]:
        return (self.median, self.created_at, self.run_id)


def _bests(db: Database, slug: str, owners: Collection[str] | None = None) -> list[_Best]:
    """Each owner's best run per (device, case, backend): one query, picked by a window.

    The problem's done runs are found by `state` (indexed) and `problem`, and read once into
    a materialized CTE that takes each result field out of the JSON once: a result holds the
    compiler's listings before the fields a board needs, so parsing it is most of the
    query's time. The window and the filters then work on those few columns."""
    c: Any = Run
    if db.engine.dialect.name == "postgresql":
        # PostgreSQL's json type is parsed again by every operator: parse each result once,
        # into jsonb, and take the fields out of that.
        c = (
            select(
                Run.user,
                Run.backend,
                Run.created_at,
                Run.id,
                cast(Run.result, JSONB).label("result"),
            )
            .where(*_counted(slug, owners))
            .cte("done")
            .prefix_with("MATERIALIZED")
        ).c
    doc = c.result
    found = (
        select(
            c.user.label("owner"),
            c.backend.label("backend"),
            c.created_at.label("created_at"),
            c.id.label("id"),
            doc["verified"].as_boolean().label("verified"),
            doc[("timing", "median_us")].as_float().label("median"),
            doc[("system", "device")].as_string().label("device"),
            func.coalesce(doc[("timing", "case")].as_string(), "").label("at"),
            doc[("roofline", "percent_of_roofline")].as_float().label("percent"),
            doc[("roofline", "speedup_over_baseline")].as_float().label("speedup"),
        )
        .where(*(_counted(slug, owners) if c is Run else ()))
        .cte("found")
        .prefix_with("MATERIALIZED")
    )
    f = found.c
    place = (
        func.row_number()
        .over(
            partition_by=(f.device, f.at, f.backend, f.owner),
            order_by=(f.median, f.created_at, f.id),
        )
        .label("place")
    )
    ranked = (
        select(
            f.device,
            f.at,
            f.backend,
            f.owner,
            f.median,
            f.created_at,
            f.id,
            f.percent,
            f.speedup,
            place,
        )
        .where(
            f.verified == True,  # noqa: E712 - SQL, not Python
            f.median.is_not(None),
            f.device.is_not(None),
        )
        .subquery()
    )
    stmt = select(*(c for c in ranked.c if c.name != "place")).where(ranked.c.place == 1)
    with db.session() as s:
        rows = s.execute(stmt).all()
    return [
        _Best(
            str(device),
            str(at),
            str(backend),
            str(owner),
            float(median),
            created_at,
            str(run_id),
            None if percent is None else float(percent),
            None if speedup is None else float(speedup),
        )
        for device, at, backend, owner, median, created_at, run_id, percent, speedup in rows
    ]


def choices(bests: list[_Best]) -> list[Choice]:
    """Every (device, case) with verified runs, the most entrants first."""
    owners: dict[tuple[str, str], set[str]] = {}
    backends: dict[tuple[str, str], set[str]] = {}
    for b in bests:
        owners.setdefault((b.device, b.case), set()).add(b.owner)
        backends.setdefault((b.device, b.case), set()).add(b.backend)
    out = [
        Choice(device, case, len(who), tuple(sorted(backends[(device, case)])))
        for (device, case), who in owners.items()
    ]
    return sorted(out, key=lambda c: (-c.entrants, c.device, c.case))


def _ranked(bests: list[_Best], pick: Choice, backend: str | None) -> list[_Best]:
    """The board's runs: each owner's best on `pick` (and `backend`), fastest first."""
    mine: dict[str, _Best] = {}
    for b in bests:
        if (b.device, b.case) != (pick.device, pick.case):
            continue
        if backend is not None and b.backend != backend:
            continue
        if b.owner not in mine or b.order < mine[b.owner].order:
            mine[b.owner] = b
    return sorted(mine.values(), key=lambda b: b.order)


def leaderboard(
    db: Database,
    problem: ProblemSpec,
    key: bytes,
    viewer: str,
    device: str | None = None,
    case: str | None = None,
    backend: str | None = None,
    limit: int = BOARD_LIMIT,
    owners: Collection[str] | None = None,
) -> Board:
    """`problem`'s board on `device` and `case` (default: the board with the most entrants),
    the first `limit` rows and the viewer's own row wherever it is; only `owners`' runs where
    given (a cohort's members)."""
    bests = _bests(db, problem.slug, owners)
    found = choices(bests)
    pick = next(
        (
            c
            for c in found
            if (device is None or c.device == device) and (case is None or c.case == case)
        ),
        None,
    )
    if pick is None:
        return Board(problem.slug, problem.title, device, case, backend, found)
    best = _ranked(bests, pick, backend)
    shown = [(i, b) for i, b in enumerate(best) if i < limit or b.owner == viewer]
    names = public_names(db, [b.owner for _, b in shown], key)
    rows = []
    for i, b in shown:
        tier = tier_reached(problem, b.percent, b.speedup)
        rows.append(
            BoardRow(
                rank=i + 1,
                name=names[b.owner],
                backend=b.backend,
                backend_title=backend_title(b.backend),
                median_us=b.median,
                time=fmt.duration_us(b.median),
                percent_of_roofline=b.percent,
                tier=tier.name if tier is not None else None,
                submitted_at=b.created_at,
                mine=b.owner == viewer,
            )
        )
    return Board(
        problem.slug,
        problem.title,
        pick.device,
        pick.case,
        backend,
        found,
        rows,
        entrants=len(best),
    )
