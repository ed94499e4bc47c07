"""Assignments and submissions: a cohort's set of exercises with a deadline, and the runs its
learners hand in for them (docs/classroom.md).

An exercise is a kernel cell of the book, named by its id as app/services/progress.py names
it. A learner submits one of their own finished runs of an exercise's cell; the submission
is late when it comes after the deadline, and is stored all the same. Grading runs the same
source again through RunService's own path (stored first, then handed to the executor), on
the assignment's device kind where it names one, with the assignment's hidden seed as the
job's secret seed (RunJob.secret_seed) where it has one. The grading run belongs to the
learner (they can open it) and is marked as one by its submission (`graded_run_id`); like a
profile run it is no attempt of the cell, so the cell's history stays the learner's own.

A submission follows its grading run: once that run is final, a correct verdict (done, every
check right) makes it "graded" with the run's share of the roofline as its score, anything
else "failed". Each read of submissions settles the pending ones whose runs have ended.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from kplay.app import format as fmt
from kplay.app.book import Book
from kplay.app.db.classroom import Assignment, Submission
from kplay.app.db.models import Run, User, utcnow
from kplay.app.services import cohorts as co
from kplay.app.services import gradingcases
from kplay.app.services.access import Viewer
from kplay.app.services.accounts import owner_key
from kplay.app.services.grading import settle, start_grading
from kplay.app.services.records import is_final
from kplay.app.services.runs import RUN_ID, RunService

MAX_TITLE = 200
MAX_EXERCISES = 50
DEVICE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 _.-")
# A hidden seed fits a signed 64-bit column and the harness's own secret seeds (62 bits).
SEED_BITS = 62
RUNS_LISTED = 20


@dataclass(frozen=True)
class Exercise:
    id: str
    title: str
    chapter: str
    url: str


def catalogue(book: Book, catalog: Any) -> list[Exercise]:
    """Every kernel cell of the book, in reading order: what an assignment may hold."""
    out = []
    for part in book.parts():
        for ch in part.chapters:
            for cell in ch.cells:
                spec = catalog.get(cell.problem)
                title = cell.title or (spec.title if spec else cell.problem)
                out.append(Exercise(cell.id, title, ch.label, f"{ch.url}#cell-{cell.id}"))
    return out


def check_title(title: str) -> str:
    title = " ".join(title.split())
    if not title:
        raise co.CohortError(422, "give the assignment a title", "title")
    if len(title) > MAX_TITLE or any(ord(ch) < 32 or ord(ch) == 127 for ch in title):
        raise co.CohortError(422, f"a title is at most {MAX_TITLE} printable characters", "title")
    return title


def check_exercises(picked: list[str], known: dict[str, Exercise]) -> list[str]:
    out: list[str] = []
    for name in picked:
        name = name.strip()
        if name and name not in out:
            if name not in known:
                shown = name[:80].encode("unicode_escape").decode()
                raise co.CohortError(
                    422, f"no exercise {shown!r}: pick kernel cells of the book", "exercises"
                )
            out.append(name)
    if not out:
        raise co.CohortError(422, "pick at least one exercise", "exercises")
    if len(out) > MAX_EXERCISES:
        raise co.CohortError(422, f"at most {MAX_EXERCISES} exercises per assignment", "exercises")
    return out


def check_deadline(deadline: datetime | str) -> datetime:
    """A deadline as an aware UTC datetime; one given without a zone is read as UTC."""
    if isinstance(deadline, str):
        try:
            deadline = datetime.fromisoformat(deadline.strip())
        except ValueError:
            raise co.CohortError(
                422, "the deadline is not a date and time (e.g. 2027-01-31T18:00)", "deadline"
            ) from None
    if deadline.tzinfo is None:
        deadline = deadline.replace(tzinfo=UTC)
    if not 2000 <= deadline.year <= 9999:
        raise co.CohortError(422, "the deadline's year is out of range", "deadline")
    return deadline.astimezone(UTC)


def check_device(kind: str | None) -> str | None:
    kind = (kind or "").strip()
    if not kind:
        return None
    if len(kind) > 64 or not set(kind) <= DEVICE_CHARS or not kind[0].isalnum():
        raise co.CohortError(
            422, "a device kind is a model name such as H100 (letters, digits, ' _.-')", "device"
        )
    return kind


@dataclass(frozen=True)
class AssignmentView:
    """An assignment as a member sees it; the hidden seed's value never leaves the service."""

    id: int
    cohort_id: int
    title: str
    exercises: list[str]
    deadline: datetime
    device_kind: str | None
    hidden_cases: bool  # graded on inputs drawn from a secret seed of its own
    created_at: datetime

    @property
    def past_deadline(self) -> bool:
        return utcnow() > self.deadline

    def public(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "cohort": self.cohort_id,
            "title": self.title,
            "exercises": list(self.exercises),
            "deadline": fmt.iso(self.deadline),
            "past_deadline": self.past_deadline,
            "device_kind": self.device_kind,
            "hidden_cases": self.hidden_cases,
        }


@dataclass(frozen=True)
class SubmissionView:
    id: int
    assignment_id: int
    user_id: int
    learner: str
    exercise: str
    run_id: str
    graded_run_id: str | None
    submitted_at: datetime
    late: bool
    state: str
    score: float | None
    run_state: str | None  # the grading run's state, in its own words

    def public(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "assignment": self.assignment_id,
            "learner": self.learner,
            "exercise": self.exercise,
            "run": self.run_id,
            "grading_run": self.graded_run_id,
            "submitted_at": fmt.iso(self.submitted_at),
            "late": self.late,
            "state": self.state,
            "score": self.score,
            "grading_run_state": self.run_state,
        }


def _view(a: Assignment) -> AssignmentView:
    return AssignmentView(
        a.id,
        a.cohort_id,
        a.title,
        list(a.exercises or []),
        a.deadline,
        a.device_kind,
        a.hidden_seed is not None,
        a.created_at,
    )


class Assignments:
    """Assignments and submissions, on the app's database and its run service."""

    def __init__(self, runs: RunService) -> None:
        self.runs = runs
        self.db = runs.db
        self.cohorts = co.Cohorts(runs.db)

    def exercises(self) -> dict[str, Exercise]:
        return {e.id: e for e in catalogue(self.runs.book, self.runs.catalog)}

    # ---------------------------------------------------------------- assignments

    def create(
        self,
        viewer: Viewer,
        cohort_id: int,
        title: str,
        exercises: list[str],
        deadline: datetime | str,
        device_kind: str | None = None,
        hidden_seed: bool = False,
    ) -> AssignmentView:
        self.cohorts.teach(viewer, cohort_id)
        row = Assignment(
            cohort_id=cohort_id,
            title=check_title(title),
            exercises=check_exercises(exercises, self.exercises()),
            deadline=check_deadline(deadline),
            device_kind=check_device(device_kind),
            hidden_seed=1 + secrets.randbits(SEED_BITS) if hidden_seed else None,
        )
        with self.db.session() as s:
            s.add(row)
        return _view(row)

    def of_cohort(self, viewer: Viewer, cohort_id: int) -> list[AssignmentView]:
        self.cohorts.view(viewer, cohort_id)
        stmt = (
            select(Assignment)
            .where(Assignment.cohort_id == cohort_id)
            .order_by(Assignment.deadline, Assignment.id)
        )
        with self.db.session() as s:
            return [_view(a) for a in s.scalars(stmt)]

    def get(self, viewer: Viewer, assignment_id: int) -> tuple[AssignmentView, co.CohortView]:
        """The assignment and its cohort, for a member of it; 404 for anyone else."""
        row, cohort = self.cohorts.assignment(viewer, assignment_id)
        return _view(row), cohort

    # ---------------------------------------------------------------- submissions

    def finished_runs(self, viewer: Viewer, exercise: str) -> list[Run]:
        """The viewer's own finished runs of an exercise's cell, newest first."""
        stmt = (
            select(Run)
            .where(Run.user == str(viewer), Run.cell_id == exercise)
            .order_by(Run.created_at.desc(), Run.id.desc())
            .limit(RUNS_LISTED * 2)
        )
        with self.db.session() as s:
            found = [r for r in s.scalars(stmt) if is_final(r.state)]
        return found[:RUNS_LISTED]

    def submit(
        self, viewer: Viewer, assignment_id: int, exercise: str, run_id: str
    ) -> SubmissionView:
        """Hand in one of the viewer's own finished runs of `exercise`; start its grading."""
        user_id = co.signed_in_only(viewer, "hand in a run")
        assignment, cohort = self.get(viewer, assignment_id)
        if cohort.role != "learner":
            raise co.CohortError(403, "only the cohort's learners hand in runs")
        if exercise not in assignment.exercises:
            shown = exercise[:80].encode("unicode_escape").decode()
            raise co.CohortError(422, f"exercise {shown!r} is not part of this assignment")
        run = self._own_run(viewer, run_id)
        if run.cell_id != exercise:
            raise co.CohortError(422, f"run {run_id} is not a run of exercise {exercise!r}")
        if not is_final(run.state):
            raise co.CohortError(409, "this run has not finished yet: hand it in once it has")
        submitted = utcnow()
        with self.db.session() as s:
            row = s.get(Assignment, assignment_id)
        seed, cases = row.hidden_seed if row else None, gradingcases.of_row(row, exercise)
        grading = start_grading(self.runs, run, str(viewer), assignment.device_kind, seed, cases)
        row = Submission(
            assignment_id=assignment_id,
            user_id=user_id,
            exercise=exercise,
            run_id=run.id,
            graded_run_id=grading.id,
            submitted_at=submitted,
            late=submitted > assignment.deadline,
            state="pending",
        )
        with self.db.session() as s:
            s.add(row)
        settle(self.db, [row])
        return self._views([row])[0]

    def _own_run(self, viewer: Viewer, run_id: str) -> Run:
        missing = co.CohortError(404, f"no run {run_id[:40]!r} of yours")
        if not RUN_ID.fullmatch(run_id):
            raise missing
        with self.db.session() as s:
            run = s.get(Run, run_id)
        # Only the viewer's own runs: an instructor's or an admin's reach does not count here.
        if run is None or run.user != str(viewer):
            raise missing
        return run

    def submissions(self, viewer: Viewer, assignment_id: int) -> list[SubmissionView]:
        """Newest first: the viewer's own, or every learner's for those who teach the cohort."""
        _assignment, cohort = self.get(viewer, assignment_id)
        stmt = select(Submission).where(Submission.assignment_id == assignment_id)
        if not cohort.teaching:
            stmt = stmt.where(Submission.user_id == viewer.account_id)
        stmt = stmt.order_by(Submission.submitted_at.desc(), Submission.id.desc())
        with self.db.session() as s:
            rows = list(s.scalars(stmt))
        settle(self.db, rows)
        return self._views(rows)

    def _views(self, rows: list[Submission]) -> list[SubmissionView]:
        users = {r.user_id for r in rows}
        graded = [r.graded_run_id for r in rows if r.graded_run_id]
        with self.db.session() as s:
            named = s.execute(select(User.id, User.display_name).where(User.id.in_(users)))
            names = {uid: name for uid, name in named}
            states = {
                rid: st
                for rid, st in s.execute(select(Run.id, Run.state).where(Run.id.in_(graded)))
            }
        return [
            SubmissionView(
                r.id,
                r.assignment_id,
                r.user_id,
                names.get(r.user_id, owner_key(r.user_id)),
                r.exercise,
                r.run_id,
                r.graded_run_id,
                r.submitted_at,
                r.late,
                r.state,
                r.score,
                states.get(r.graded_run_id) if r.graded_run_id else None,
            )
            for r in rows
        ]

    def status(self, views: list[SubmissionView]) -> dict[str, SubmissionView]:
        """Each exercise's latest submission among `views` (newest first already)."""
        latest: dict[str, SubmissionView] = {}
        for v in views:
            latest.setdefault(v.exercise, v)
        return latest
