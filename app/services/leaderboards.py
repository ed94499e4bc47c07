"""Leaderboards: per exercise, the best verified run of each owner on one device and one
benchmark case, fastest first.

Only verified runs count (`RunResult.verified`: done, timed on real hardware, on secret
seeds, each checked repetition right, within the device's ceilings). A suspicious run, a
simulated one, a run on public seeds and a profile run never appear. Times are only compared
where they were measured alike: the same device (as the run's `system.device` names it) and
the same benchmark case; a backend filter narrows the board further.

Each owner's best run is picked in the database (a window over the owner's runs), ties going
to the earlier submission; a row shows no run id and no source (a run is its owner's only),
and its name comes from `boardnames.public_names`.

The runs are found through the index on `runs.state` (`state = 'done'`) with the problem
and the result's fields as filters: see docs/progress.md for what an index on
(problem, state) would add.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, func, select

from kplay.app import format as fmt
from kplay.app.db.models import Run
from kplay.app.db.session import Database
from kplay.app.services.boardnames import public_names
from kplay.app.services.problems import backend_title
from kplay.app.services.progress import tier_reached
from kplay.kernels.problem import ProblemSpec

# The most rows a board shows; the viewer's own row is added below them when it is further.
BOARD_LIMIT = 100

_R = Run.result
MEDIAN = _R[("timing", "median_us")].as_float()
CASE = _R[("timing", "case")].as_string()
DEVICE = _R[("system", "device")].as_string()
PERCENT = _R[("roofline", "percent_of_roofline")].as_float()
SPEEDUP = _R[("roofline", "speedup_over_baseline")].as_float()
VERIFIED = _R["verified"].as_boolean()


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


def _counted(slug: str) -> list[ColumnElement[bool]]:
    """What a run needs to be on `slug`'s boards at all."""
    return [
        Run.state == "done",
        Run.problem == slug,
        Run.profile_of.is_(None),
        VERIFIED == True,  # noqa: E712 - SQL, not Python
        MEDIAN.is_not(None),
        DEVICE.is_not(None),
    ]


def choices(db: Database, slug: str) -> list[Choice]:
    """Every (device, case) with verified runs of `slug`, the most entrants first."""
    where = _counted(slug)
    case = func.coalesce(CASE, "")
    owners = select(DEVICE, case, func.count(func.distinct(Run.user))).where(*where)
    backends = select(DEVICE, case, Run.backend).where(*where).distinct()
    with db.session() as s:
        counted = s.execute(owners.group_by(DEVICE, case)).all()
        pairs = s.execute(backends).all()
    found: dict[tuple[str, str], set[str]] = {}
    for device, at, backend in pairs:
        found.setdefault((str(device), str(at)), set()).add(str(backend))
    out = [
        Choice(str(device), str(at), int(n), tuple(sorted(found.get((str(device), str(at)), ()))))
        for device, at, n in counted
    ]
    return sorted(out, key=lambda c: (-c.entrants, c.device, c.case))


def _best_per_owner(
    db: Database, slug: str, device: str, case: str, backend: str | None
) -> list[tuple[Any, ...]]:
    where = [*_counted(slug), DEVICE == device, func.coalesce(CASE, "") == case]
    if backend is not None:
        where.append(Run.backend == backend)
    place = (
        func.row_number()
        .over(partition_by=Run.user, order_by=(MEDIAN, Run.created_at, Run.id))
        .label("place")
    )
    ranked = (
        select(
            Run.user.label("owner"),
            Run.backend.label("backend"),
            Run.created_at.label("created_at"),
            MEDIAN.label("median"),
            PERCENT.label("percent"),
            SPEEDUP.label("speedup"),
            Run.id.label("id"),
            place,
        )
        .where(and_(*where))
        .subquery()
    )
    stmt = (
        select(
            ranked.c.owner,
            ranked.c.backend,
            ranked.c.created_at,
            ranked.c.median,
            ranked.c.percent,
            ranked.c.speedup,
        )
        .where(ranked.c.place == 1)
        .order_by(ranked.c.median, ranked.c.created_at, ranked.c.id)
    )
    with db.session() as s:
        return [tuple(row) for row in s.execute(stmt).all()]


def leaderboard(
    db: Database,
    problem: ProblemSpec,
    key: bytes,
    viewer: str,
    device: str | None = None,
    case: str | None = None,
    backend: str | None = None,
    limit: int = BOARD_LIMIT,
) -> Board:
    """`problem`'s board on `device` and `case` (default: the board with the most entrants),
    the first `limit` rows and the viewer's own row wherever it is."""
    found = choices(db, problem.slug)
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
    best = _best_per_owner(db, problem.slug, pick.device, pick.case, backend)
    shown = [(i, row) for i, row in enumerate(best) if i < limit or row[0] == viewer]
    names = public_names(db, [row[0] for _, row in shown], key)
    rows = []
    for i, (owner, back, created_at, median, percent, speedup) in shown:
        tier = tier_reached(problem, percent, speedup)
        rows.append(
            BoardRow(
                rank=i + 1,
                name=names[owner],
                backend=back,
                backend_title=backend_title(back),
                median_us=float(median),
                time=fmt.duration_us(float(median)),
                percent_of_roofline=None if percent is None else float(percent),
                tier=tier.name if tier is not None else None,
                submitted_at=created_at,
                mine=owner == viewer,
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
