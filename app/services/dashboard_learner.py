"""One learner of a cohort seen by its instructor (every attempt on the cohort's exercises,
with its verdict, its roofline point, the change from the attempt before and the profiles
made of it), and the cohort's gradebook as CSV.
"""

from __future__ import annotations

import csv
import difflib
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select

from kplay.app.db.classroom import Submission
from kplay.app.db.models import Run
from kplay.app.db.session import Database
from kplay.app.services.dashboard import CohortState
from kplay.app.services.dashboard_roster import Learner, Roster
from kplay.app.services.dashboard_view import Exercise
from kplay.app.services.progress import _number

MAX_DIFF_LINES = 200
# A spreadsheet runs a cell that starts with one of these as a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


@dataclass(frozen=True)
class DiffLine:
    kind: str  # add, del, hunk, same
    text: str


@dataclass(frozen=True)
class AttemptView:
    id: str
    exercise: str
    backend: str
    state: str
    verdict: str
    created_at: datetime
    percent: float | None
    intensity: float | None
    achieved_flops: float | None
    bound: str | None
    median_us: float | None
    diff: list[DiffLine] = field(default_factory=list)
    diff_cut: bool = False
    first: bool = False
    profiles: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.state == "done"


def source_diff(
    before: str, after: str, limit: int = MAX_DIFF_LINES
) -> tuple[list[DiffLine], bool]:
    """The unified diff from one attempt's source to the next; cut after `limit` lines."""
    lines = list(
        difflib.unified_diff(
            before.splitlines(), after.splitlines(), "before", "after", n=2, lineterm=""
        )
    )[2:]  # the two header lines name nothing useful here
    out = []
    for line in lines[:limit]:
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "same")
        out.append(DiffLine(kind, line))
    return out, len(lines) > limit


def attempts(db: Database, learner: Learner, shown: list[Exercise]) -> list[AttemptView]:
    """The learner's runs on `shown`, oldest first, each with the diff from the one before on
    the same exercise; profile runs are listed under the run they profiled."""
    ids = [e.id for e in shown]
    if not ids:
        return []
    r = Run.result
    stmt = (
        select(
            Run.id,
            Run.cell_id,
            Run.backend,
            Run.state,
            Run.detail,
            Run.created_at,
            Run.source,
            Run.profile_of,
            r[("roofline", "percent_of_roofline")],
            r[("roofline", "intensity_flops_per_byte")],
            r[("roofline", "achieved_flops_per_s")],
            r[("roofline", "bound")],
            r[("timing", "median_us")],
        )
        .where(Run.user == learner.owner, Run.cell_id.in_(ids))
        .order_by(Run.created_at, Run.id)
    )
    with db.session() as s:
        rows = s.execute(stmt).all()
    profiles: dict[str, list[str]] = {}
    out: list[AttemptView] = []
    last_source: dict[str, str] = {}
    for rid, cell, backend, state, detail, created, source, profile_of, *numbers in rows:
        if profile_of is not None:
            profiles.setdefault(profile_of, []).append(rid)
            continue
        pct, intensity, achieved, bound, median = numbers
        before = last_source.get(cell)
        diff, cut = source_diff(before, source) if before is not None else ([], False)
        last_source[cell] = source
        out.append(
            AttemptView(
                rid,
                cell,
                backend,
                state,
                detail or state,
                created,
                _number(pct),
                _number(intensity),
                _number(achieved),
                bound if isinstance(bound, str) else None,
                _number(median),
                diff,
                cut,
                before is None,
            )
        )
    for a in out:
        a.profiles.extend(profiles.get(a.id, []))
    return out


# ------------------------------------------------------------------ gradebook


def safe_cell(value: object) -> str:
    """A CSV cell a spreadsheet shows as text: one that would start a formula gets a quote."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


@dataclass(frozen=True)
class Grade:
    score: float | None = None
    late: bool = False
    submitted: bool = False


def grades(db: Database, roster: Roster) -> dict[tuple[int, str], Grade]:
    """Per learner and exercise over the cohort's assignments: the best score of a
    submission, and whether any submission came late."""
    ids = [a.id for a in roster.assignments]
    if not ids:
        return {}
    stmt = select(Submission.user_id, Submission.exercise, Submission.score, Submission.late)
    with db.session() as s:
        rows = s.execute(stmt.where(Submission.assignment_id.in_(ids))).all()
    out: dict[tuple[int, str], Grade] = {}
    for uid, exercise, score, late in rows:
        had = out.get((uid, exercise), Grade())
        best = had.score if score is None else score if had.score is None else max(score, had.score)
        out[(uid, exercise)] = Grade(best, had.late or bool(late), True)
    return out


def gradebook_csv(
    roster: Roster,
    state: CohortState,
    shown: list[Exercise],
    found: Mapping[tuple[int, str], Grade],
) -> str:
    """One row per learner: name, e-mail, then per exercise its best state, tier, best
    submitted score and whether a submission was late."""
    buf = io.StringIO()
    out = csv.writer(buf, quoting=csv.QUOTE_MINIMAL, lineterminator="\r\n")
    head = ["learner", "email"]
    for e in shown:
        head += [f"{e.id} state", f"{e.id} tier", f"{e.id} score", f"{e.id} late"]
    out.writerow([safe_cell(h) for h in head])
    for x in roster.learners:
        row: list[object] = [x.name, x.email]
        for e in shown:
            c = state.cell(x.owner, e.id)
            g = found.get((x.user_id, e.id), Grade())
            score = "" if g.score is None else f"{g.score:g}"
            late = ("yes" if g.late else "no") if g.submitted else ""
            row += [c.key, c.tier.name if c.tier else "", score, late]
        out.writerow([safe_cell(v) for v in row])
    return buf.getvalue()
