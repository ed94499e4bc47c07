"""How far one reader has come, per cell and per problem: not tried, not correct yet, correct,
or a tier of the problem reached (its `[[tiers]]`: a share of the roofline or of the
baseline's speed).

The best run counts, not the latest: a wrong attempt after a correct one takes nothing away.
A page learns all of it from one query over the reader's runs, which reads the few result
fields the state needs rather than whole results.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from kplay.app.db.models import Run
from kplay.app.db.session import Database
from kplay.app.services.exerciseprogress import answered_cells
from kplay.app.services.records import is_final
from kplay.kernels.models import RunResult
from kplay.kernels.problem import ProblemSpec, Tier

# Ranks: the higher, the further along.
UNTRIED, RUNNING, WRONG, CORRECT, TIER = range(5)
KEYS = {UNTRIED: "untried", RUNNING: "running", WRONG: "wrong", CORRECT: "correct", TIER: "tier"}
LABELS = {
    UNTRIED: "Not tried",
    RUNNING: "Running",
    WRONG: "Not correct yet",
    CORRECT: "Correct",
}


def tier_reached(
    problem: ProblemSpec, percent_of_roofline: float | None, speedup_over_baseline: float | None
) -> Tier | None:
    """The highest of the problem's tiers a correct, timed run meets: each threshold a tier
    names must be met (its share of the roofline, its share of the baseline's speed)."""
    reached = None
    for tier in problem.tiers:
        needs = []
        if tier.percent_of_roofline is not None:
            needs.append(_ge(percent_of_roofline, tier.percent_of_roofline))
        if tier.percent_of_baseline is not None:
            share = None if speedup_over_baseline is None else 100.0 * speedup_over_baseline
            needs.append(_ge(share, tier.percent_of_baseline))
        if needs and all(needs):
            reached = tier
    return reached


def result_tier(problem: ProblemSpec, result: RunResult) -> Tier | None:
    """The tier a finished run reached; None unless it is correct and placed on the roofline."""
    roof = result.roofline
    correct = result.state.value == "done" and result.check is not None and result.check.ok
    if not correct or roof is None:
        return None
    return tier_reached(problem, roof.percent_of_roofline, roof.speedup_over_baseline)


def _ge(value: float | None, threshold: float) -> bool:
    return value is not None and math.isfinite(value) and value >= threshold


def _number(value: Any) -> float | None:
    # Stored results spell NaN and the infinities as strings (records.json_safe).
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


@dataclass(frozen=True)
class Outcome:
    """One run, as far as progress goes."""

    cell_id: str | None
    problem: str
    state: str
    check_ok: bool
    percent_of_roofline: float | None
    speedup_over_baseline: float | None

    def rank(self, problem: ProblemSpec | None) -> tuple[int, int, Tier | None]:
        """(rank, tier's place among the problem's tiers, tier)."""
        if not is_final(self.state):
            return RUNNING, -1, None
        if self.state != "done" or not self.check_ok:
            return WRONG, -1, None
        if problem is None or self.percent_of_roofline is None:
            return CORRECT, -1, None
        tier = tier_reached(problem, self.percent_of_roofline, self.speedup_over_baseline)
        if tier is None:
            return CORRECT, -1, None
        return TIER, problem.tiers.index(tier), tier


@dataclass(frozen=True)
class Progress:
    rank: int = UNTRIED
    runs: int = 0
    tier: Tier | None = None

    @property
    def key(self) -> str:
        return KEYS[self.rank]

    @property
    def label(self) -> str:
        if self.tier is not None:
            return self.tier.name.capitalize()
        return LABELS[self.rank]

    @property
    def note(self) -> str:
        """The label's longer form, for a tooltip and for screen readers."""
        if self.rank == UNTRIED:
            return "You have not run this yet."
        runs = f"{self.runs} run{'s' if self.runs != 1 else ''}"
        if self.tier is not None:
            what = f" ({self.tier.description})" if self.tier.description else ""
            return f"Tier {self.tier.name} reached{what}; {runs}."
        return {
            RUNNING: f"A run is in progress; {runs}.",
            WRONG: f"No correct run yet; {runs}.",
            CORRECT: f"Correct; no tier reached yet; {runs}.",
        }[self.rank]


NOT_TRIED = Progress()


@dataclass(frozen=True)
class ReaderProgress:
    by_cell: dict[str, Progress] = field(default_factory=dict)
    by_problem: dict[str, Progress] = field(default_factory=dict)

    def cell(self, cell_id: str) -> Progress:
        return self.by_cell.get(cell_id, NOT_TRIED)

    def problem(self, slug: str) -> Progress:
        return self.by_problem.get(slug, NOT_TRIED)


def outcomes(db: Database, user: str) -> list[Outcome]:
    """Every run of `user`, reduced to what progress needs: one query."""
    result = Run.result
    stmt = select(
        Run.cell_id,
        Run.problem,
        Run.state,
        result[("check", "ok")],
        result[("roofline", "percent_of_roofline")],
        result[("roofline", "speedup_over_baseline")],
    ).where(Run.user == user)
    with db.session() as s:
        rows = s.execute(stmt).all()
    return [
        # SQLite's JSON_EXTRACT reads a JSON true as 1; PostgreSQL gives True.
        Outcome(cell, problem, state, ok in (True, 1), _number(percent), _number(speedup))
        for cell, problem, state, ok, percent, speedup in rows
    ]


def fold(
    found: list[Outcome],
    catalog: Mapping[str, ProblemSpec],
    key: Callable[[Outcome], str | None],
) -> dict[str, Progress]:
    """The best progress per `key` (a cell's id, a problem's slug) over `found`."""
    best: dict[str, tuple[int, int, Tier | None]] = {}
    counts: dict[str, int] = {}
    for outcome in found:
        name = key(outcome)
        if name is None:
            continue
        counts[name] = counts.get(name, 0) + 1
        ranked = outcome.rank(catalog.get(outcome.problem))
        if name not in best or ranked[:2] > best[name][:2]:
            best[name] = ranked
    return {
        name: Progress(rank=rank, runs=counts[name], tier=tier)
        for name, (rank, _place, tier) in best.items()
    }


def with_answers(by_cell: dict[str, Progress], db: Database, user: str) -> dict[str, Progress]:
    """`by_cell` with the cells answered rather than run (a stored profile's questions,
    app.services.exerciseprogress): correct once each question's latest answer is right."""
    for cell, (solved, checks) in answered_cells(db, user).items():
        mine = Progress(rank=CORRECT if solved else WRONG, runs=checks)
        if mine.rank > by_cell.get(cell, NOT_TRIED).rank:
            by_cell[cell] = mine
    return by_cell


def reader_progress(db: Database, catalog: Mapping[str, ProblemSpec], user: str) -> ReaderProgress:
    """Per cell and per problem (over every cell and API run of it), from one query."""
    found = outcomes(db, user)
    return ReaderProgress(
        by_cell=with_answers(fold(found, catalog, lambda o: o.cell_id), db, user),
        by_problem=fold(found, catalog, lambda o: o.problem),
    )
