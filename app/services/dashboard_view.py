"""What the dashboard shows, made from a cohort's state (app.services.dashboard): the heatmap
of learners by exercises, the failures grouped by their verdict's message, each exercise's
spread of best times, and who is stuck. All of it is computed from memory; nothing here
reads the database.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache

from markupsafe import Markup, escape

from kplay.app import format as fmt
from kplay.app.book import Book
from kplay.app.services.dashboard import Cell, CohortState
from kplay.app.services.dashboard_roster import Learner, Roster
from kplay.app.services.progress import CORRECT, WRONG

STUCK_FAILS = 5  # failed attempts on one exercise ...
STUCK_MINUTES = 20  # ... and no step forward on it for this long
MAX_CLUSTERS = 12
HIST_BINS = 12
HIST_W, HIST_H = 180, 40

SHORT = {"untried": "·", "running": "…", "correct": "✓"}
STATE_WORDS = {
    "untried": "not tried",
    "running": "running",
    "wrong": "not correct yet",
    "correct": "correct, no tier",
}


@dataclass(frozen=True)
class Exercise:
    id: str
    problem: str
    title: str
    url: str


@lru_cache(maxsize=4)
def _book_cells(book: Book) -> dict[str, Exercise]:
    out = {}
    for part in book.parts():
        for ch in part.chapters:
            for cell in ch.cells:
                title = cell.title or cell.problem
                out[cell.id] = Exercise(cell.id, cell.problem, title, f"{ch.url}#cell-{cell.id}")
    return out


def exercises(book: Book, ids: Iterable[str]) -> list[Exercise]:
    """The cohort's exercises as the book names them (an id the book lacks stays an id)."""
    known = _book_cells(book)
    return [known.get(i) or Exercise(i, "", i, "") for i in ids]


def cell_id(learner: Learner, column: int) -> str:
    """The heatmap cell's element id: the learner's account and the exercise's column."""
    return f"c{learner.user_id}-{column}"


@dataclass(frozen=True)
class HeatCell:
    id: str
    key: str  # untried, running, wrong, correct, tier
    tier: str | None
    text: str  # the short text shown in the cell
    words: str  # the whole state, for a tooltip (the row and column name who and what)

    def html(self, oob: bool = False) -> Markup:
        tier = f" hm-tier-{self.tier}" if self.tier else ""
        data = f' data-tier="{self.tier}"' if self.tier else ""
        swap = ' hx-swap-oob="true"' if oob else ""
        return Markup(
            f'<td id="{self.id}" class="hm hm-{self.key}{tier}" '
            f'data-state="{self.key}"{data} title="{self.words}"{swap}>{self.text}</td>'
        )


@lru_cache(maxsize=8192)
def _look(key: str, tier: str | None, runs: int, failed: int) -> tuple[str, str]:
    """A cell's text and tooltip, escaped, from what it shows."""
    if tier is not None:
        text, state = tier[:1].upper(), f"tier {tier}"
    elif key == "wrong":
        text, state = f"✗{failed}", STATE_WORDS[key]
    else:
        text, state = SHORT[key], STATE_WORDS[key]
    words = state + (f" ({runs} run{'s' if runs != 1 else ''}, {failed} failed)" if runs else "")
    return str(escape(text)), str(escape(words))


def heat_cell(learner: Learner, column: int, cell: Cell) -> HeatCell:
    key, tier = cell.key, cell.tier.name if cell.tier is not None else None
    text, words = _look(key, tier, cell.runs, cell.failed)
    safe_tier = None if tier is None else str(escape(tier))
    return HeatCell(cell_id(learner, column), key, safe_tier, text, words)


@dataclass(frozen=True)
class HeatRow:
    learner: Learner
    cells: Markup  # the row's cells, as HTML
    solved: int


def heatmap(roster: Roster, state: CohortState, shown: list[Exercise]) -> list[HeatRow]:
    """One row per learner; made once per version of the state."""

    def make() -> list[HeatRow]:
        rows = []
        for learner in roster.learners:
            cells = [state.cell(learner.owner, e.id) for e in shown]
            html = Markup("").join(heat_cell(learner, j, c).html() for j, c in enumerate(cells))
            rows.append(HeatRow(learner, html, sum(1 for c in cells if c.rank >= CORRECT)))
        return rows

    return state.remember("heatmap", make)  # type: ignore[no-any-return]


def changed_cells(
    roster: Roster, state: CohortState, shown: list[Exercise], since: datetime
) -> list[HeatCell]:
    """The cells this process took a change of in after `since`."""
    by_owner = {x.owner: x for x in roster.learners}
    by_id = {e.id: j for j, e in enumerate(shown)}
    out = []
    for (owner, ex), cell in state.cells.items():
        if cell.seen_at > since and owner in by_owner and ex in by_id:
            j = by_id[ex]
            out.append(heat_cell(by_owner[owner], j, cell))
    return out


def solved(
    roster: Roster, state: CohortState, shown: list[Exercise], cells: list[HeatCell]
) -> dict[int, int]:  # noqa: E501
    """How many exercises each learner of `cells` has solved (the heatmap's solved column)."""
    ids = {int(c.id[1:].split("-")[0]) for c in cells}
    return {
        x.user_id: sum(1 for e in shown if state.cell(x.owner, e.id).rank >= CORRECT)
        for x in roster.learners
        if x.user_id in ids
    }


# ------------------------------------------------------------------ failure clusters


@dataclass(frozen=True)
class Cluster:
    state: str
    pattern: str
    count: int
    learners: int
    example: str


def clusters(state: CohortState, limit: int = MAX_CLUSTERS) -> list[Cluster]:
    """Failed runs grouped by their state and normalised message, the most common first;
    the example is the latest message of the group."""

    def make() -> list[Cluster]:
        out = [
            Cluster(run_state, pattern, g.count, len(g.owners), g.example)
            for (run_state, pattern), g in state.failure_groups().items()
        ]
        out.sort(key=lambda c: (-c.count, c.state, c.pattern))
        return out[:limit]

    return state.remember("clusters", make)  # type: ignore[no-any-return]


# ------------------------------------------------------------------ times


@dataclass(frozen=True)
class Bar:
    x: int
    y: int
    w: int
    h: int
    count: int
    low_us: float
    high_us: float


@dataclass(frozen=True)
class Times:
    exercise: Exercise
    count: int
    p10: float | None
    p50: float | None
    p90: float | None
    bars: list[Bar]

    def words(self) -> str:
        if not self.count:
            return "no timed correct run yet"
        return (
            f"{self.count} learner{'s' if self.count != 1 else ''} with a timed correct run: "
            f"best times from {fmt.duration_us(self.bars[0].low_us)} "
            f"to {fmt.duration_us(self.bars[-1].high_us)}"
        )


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) of sorted `values`, interpolated between neighbours."""
    if len(values) == 1:
        return values[0]
    at = (len(values) - 1) * q / 100.0
    lo = math.floor(at)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (at - lo)


def histogram(values: list[float], bins: int = HIST_BINS) -> list[Bar]:
    """Bars over log-spaced bins from the fastest to the slowest of `values` (sorted)."""
    if not values:
        return []
    lo, hi = math.log10(values[0]), math.log10(values[-1])
    width = (hi - lo) / bins if hi > lo else 1.0
    counts = [0] * bins
    for v in values:
        counts[min(int((math.log10(v) - lo) / width), bins - 1)] += 1
    top = max(counts)
    step = HIST_W // bins
    return [
        Bar(
            x=i * step,
            y=HIST_H - round(HIST_H * n / top),
            w=step - 1,
            h=round(HIST_H * n / top),
            count=n,
            low_us=10 ** (lo + i * width),
            high_us=10 ** (lo + (i + 1) * width),
        )
        for i, n in enumerate(counts)
    ]


def times(roster: Roster, state: CohortState, shown: list[Exercise]) -> list[Times]:
    """Per exercise: each learner's best kernel time (median of a timed correct run)."""

    def make() -> list[Times]:
        owners = {x.owner for x in roster.learners}
        by_exercise: dict[str, list[float]] = {e.id: [] for e in shown}
        for (owner, ex), c in state.cells.items():
            if c.best_us is not None and c.best_us > 0 and owner in owners and ex in by_exercise:
                by_exercise[ex].append(c.best_us)
        out = []
        for e in shown:
            best = sorted(by_exercise[e.id])
            if not best:
                out.append(Times(e, 0, None, None, None, []))
                continue
            p10, p50, p90 = (percentile(best, q) for q in (10, 50, 90))
            out.append(Times(e, len(best), p10, p50, p90, histogram(best)))
        return out

    return state.remember("times", make, state.best_version)  # type: ignore[no-any-return]


# ------------------------------------------------------------------ stuck


@dataclass(frozen=True)
class Stuck:
    learner: Learner
    exercise: Exercise
    failed: int
    since: datetime
    last_at: datetime | None
    minutes: int


def stuck(
    roster: Roster,
    state: CohortState,
    shown: list[Exercise],
    now: datetime,
    fails: int = STUCK_FAILS,
    minutes: int = STUCK_MINUTES,
) -> list[Stuck]:
    """Learners with at least `fails` failed attempts on an exercise they have no correct
    run of, whose last step forward on it (their first attempt) is `minutes` or more ago."""
    learners = {x.owner: x for x in roster.learners}
    exercises = {e.id: e for e in shown}
    out = []
    for (owner, ex), c in state.cells.items():
        if c.rank != WRONG or c.failed < fails or c.progressed_at is None:
            continue
        waited = now - c.progressed_at
        x, e = learners.get(owner), exercises.get(ex)
        if x is not None and e is not None and waited >= timedelta(minutes=minutes):
            spent = int(waited.total_seconds() // 60)
            out.append(Stuck(x, e, c.failed, c.progressed_at, c.last_at, spent))
    out.sort(key=lambda s: (-s.failed, -s.minutes, s.learner.name))
    return out


@dataclass(frozen=True)
class Tally:
    learners: int
    exercises: int
    runs: int
    solved_cells: int


def tally(roster: Roster, state: CohortState, shown: Mapping[str, Exercise]) -> Tally:
    def make() -> Tally:
        owners = {x.owner for x in roster.learners}
        cells = [c for (o, e), c in state.cells.items() if o in owners and e in shown]
        return Tally(
            len(roster.learners),
            len(shown),
            sum(c.runs for c in cells),
            sum(1 for c in cells if c.rank >= CORRECT),
        )

    return state.remember("tally", make)  # type: ignore[no-any-return]
