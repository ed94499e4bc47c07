"""A reader's progress page (`/progress`) and its JSON (`/api/v1/progress`): per part and
chapter, each exercise's state and tier, attempts, first and best kernel times, and the time
spent on it, all from one query over the reader's own runs.

State and tier come from `progress.fold`, the same as the contents and the catalog show.
Time spent is counted from the runs' own timestamps, per exercise: runs no more than
`SESSION_GAP` apart belong to one working session, which lasts from its first run's
submission to its last run's finish; the exercise's time is the sum of its sessions. Time
spent reading or editing before a session's first run is not seen, so not counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select

from kplay.app import format as fmt
from kplay.app.book import Book
from kplay.app.db.models import Run
from kplay.app.db.session import Database
from kplay.app.services.progress import CORRECT, Outcome, Progress, _number, fold, with_answers
from kplay.kernels.problem import ProblemSpec

SESSION_GAP = timedelta(minutes=30)
COUNTED_HOW = (
    "Time spent adds up your working sessions on each exercise: runs no more than 30 minutes "
    "apart make one session, from the first run's submission to the last run's finish. "
    "Reading and editing before a session's first run are not counted. Attempts count every "
    "run you started, right or wrong; profile runs are not attempts. Kernel times are the "
    "median of the timed case, on whatever device ran them."
)


@dataclass(frozen=True)
class Attempt:
    """One of the reader's runs, as far as this page goes."""

    outcome: Outcome
    backend: str
    created_at: datetime
    finished_at: datetime | None
    median_us: float | None
    device: str | None

    @property
    def end(self) -> datetime:
        return self.finished_at or self.created_at

    @property
    def timed_correct(self) -> bool:
        o = self.outcome
        return o.state == "done" and o.check_ok and self.median_us is not None


@dataclass(frozen=True)
class ExerciseRow:
    key: str  # the cell's id, or the problem's slug for runs outside the book's cells
    problem: str
    title: str
    url: str
    progress: Progress
    attempts: int = 0
    first_at: datetime | None = None
    last_at: datetime | None = None
    first_us: float | None = None
    best_us: float | None = None
    best_at: datetime | None = None
    best_where: str = ""
    spent: timedelta = timedelta()
    sessions: int = 0

    @property
    def spent_text(self) -> str:
        return spent_words(self.spent) if self.attempts else "—"

    def public(self) -> dict[str, Any]:
        p = self.progress
        return {
            "key": self.key,
            "problem": self.problem,
            "title": self.title,
            "url": self.url,
            "state": p.key,
            "tier": p.tier.name if p.tier is not None else None,
            "attempts": self.attempts,
            "first_run_at": fmt.iso(self.first_at) if self.first_at else None,
            "last_run_at": fmt.iso(self.last_at) if self.last_at else None,
            "first_time_us": self.first_us,
            "best_time_us": self.best_us,
            "best_run_at": fmt.iso(self.best_at) if self.best_at else None,
            "best_on": self.best_where or None,
            "time_spent_s": round(self.spent.total_seconds(), 1),
            "sessions": self.sessions,
            "leaderboard": f"/leaderboards/{self.problem}",
        }


@dataclass(frozen=True)
class ChapterRows:
    label: str
    title: str
    url: str
    rows: list[ExerciseRow]


@dataclass(frozen=True)
class PartRows:
    number: int
    title: str
    chapters: list[ChapterRows]


@dataclass(frozen=True)
class ProgressPage:
    title: str
    parts: list[PartRows]
    # Runs outside the book's cells (the catalog's own cells, the API), per problem.
    elsewhere: list[ExerciseRow] = field(default_factory=list)
    counted_how: str = COUNTED_HOW

    @property
    def rows(self) -> list[ExerciseRow]:
        inside = [r for p in self.parts for c in p.chapters for r in c.rows]
        return inside + self.elsewhere

    @property
    def attempts(self) -> int:
        return sum(r.attempts for r in self.rows)

    @property
    def solved(self) -> int:
        return sum(1 for r in self.rows if r.progress.rank >= CORRECT)

    @property
    def spent(self) -> timedelta:
        return sum((r.spent for r in self.rows), timedelta())

    @property
    def spent_text(self) -> str:
        return spent_words(self.spent)

    def public(self) -> dict[str, Any]:
        return {
            "counted_how": self.counted_how,
            "session_gap_s": int(SESSION_GAP.total_seconds()),
            "attempts": self.attempts,
            "solved": self.solved,
            "time_spent_s": round(self.spent.total_seconds(), 1),
            "parts": [
                {
                    "number": p.number,
                    "title": p.title,
                    "chapters": [
                        {
                            "label": c.label,
                            "title": c.title,
                            "url": c.url,
                            "exercises": [r.public() for r in c.rows],
                        }
                        for c in p.chapters
                    ],
                }
                for p in self.parts
            ],
            "elsewhere": [r.public() for r in self.elsewhere],
        }


def spent_words(spent: timedelta) -> str:
    minutes = int(spent.total_seconds() // 60)
    if minutes < 1:
        return "under a minute"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min"


def attempts_of(db: Database, user: str) -> list[Attempt]:
    """Every run `user` started (profile runs aside), oldest first: one query."""
    r = Run.result
    stmt = (
        select(
            Run.cell_id,
            Run.problem,
            Run.state,
            r[("check", "ok")],
            r[("roofline", "percent_of_roofline")],
            r[("roofline", "speedup_over_baseline")],
            Run.backend,
            Run.created_at,
            Run.finished_at,
            r[("timing", "median_us")],
            r[("system", "device")],
        )
        .where(Run.user == user, Run.profile_of.is_(None))
        .order_by(Run.created_at, Run.id)
    )
    with db.session() as s:
        rows = s.execute(stmt).all()
    out = []
    for cell, problem, state, ok, pct, speedup, backend, created, finished, median, device in rows:
        # SQLite's JSON_EXTRACT reads a JSON true as 1; PostgreSQL gives True.
        outcome = Outcome(cell, problem, state, ok in (True, 1), _number(pct), _number(speedup))
        where = device if isinstance(device, str) else None
        out.append(Attempt(outcome, backend, created, finished, _number(median), where))
    return out


def sessions(runs: list[Attempt]) -> tuple[int, timedelta]:
    """(how many working sessions, their total span) of `runs`, oldest first."""
    count, spent = 0, timedelta()
    start = end = None
    for run in runs:
        if end is None or run.created_at - end > SESSION_GAP:
            if start is not None and end is not None:
                spent += end - start
            count, start, end = count + 1, run.created_at, run.end
        else:
            end = max(end, run.end)
    if start is not None and end is not None:
        spent += end - start
    return count, spent


def exercise_row(
    key: str, problem: str, title: str, url: str, progress: Progress, runs: list[Attempt]
) -> ExerciseRow:
    if not runs:
        return ExerciseRow(key, problem, title, url, progress)
    timed = [r for r in runs if r.timed_correct]
    best = min(timed, key=lambda r: (r.median_us, r.created_at)) if timed else None
    count, spent = sessions(runs)
    return ExerciseRow(
        key,
        problem,
        title,
        url,
        progress,
        attempts=len(runs),
        first_at=runs[0].created_at,
        last_at=runs[-1].created_at,
        first_us=timed[0].median_us if timed else None,
        best_us=best.median_us if best else None,
        best_at=best.created_at if best else None,
        best_where=f"{best.backend}, {best.device or 'unknown device'}" if best else "",
        spent=spent,
        sessions=count,
    )


def progress_page(
    book: Book, catalog: Mapping[str, ProblemSpec], db: Database, user: str
) -> ProgressPage:
    found = attempts_of(db, user)
    outcomes = [a.outcome for a in found]
    by_cell = with_answers(fold(outcomes, catalog, lambda o: o.cell_id), db, user)
    runs_of: dict[str, list[Attempt]] = {}
    for a in found:
        if a.outcome.cell_id is not None:
            runs_of.setdefault(a.outcome.cell_id, []).append(a)
    parts, placed = [], set()
    for part in book.parts():
        chapters = []
        for ch in part.chapters:
            rows = []
            for cell in ch.cells:
                placed.add(cell.id)
                spec = catalog.get(cell.problem)
                title = cell.title or (spec.title if spec else cell.problem)
                progress = by_cell.get(cell.id, Progress())
                url = f"{ch.url}#cell-{cell.id}"
                rows.append(
                    exercise_row(
                        cell.id, cell.problem, title, url, progress, runs_of.get(cell.id, [])
                    )
                )
            if rows:
                chapters.append(ChapterRows(ch.label, ch.title, ch.url, rows))
        if chapters:
            parts.append(PartRows(part.number, part.title, chapters))
    outside = [a for a in found if a.outcome.cell_id not in placed]
    by_problem = fold([a.outcome for a in outside], catalog, lambda o: o.problem)
    elsewhere = []
    for slug in sorted({a.outcome.problem for a in outside}):
        spec = catalog.get(slug)
        runs = [a for a in outside if a.outcome.problem == slug]
        title = spec.title if spec else slug
        elsewhere.append(
            exercise_row(slug, slug, title, f"/problems/{slug}", by_problem[slug], runs)
        )
    return ProgressPage(title="Your progress", parts=parts, elsewhere=elsewhere)
