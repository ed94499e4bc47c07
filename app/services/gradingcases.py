"""An assignment's hidden grading cases: per exercise, test cases the grader checks beyond the
problem's own (docs/classroom.md).

Whoever teaches the cohort writes them in the notation of the problem's problem.toml, one
`[[tests]]` table per case (`name`, `params`, an optional `seed`); kernels.hiddencases checks
them against the exercise's problem and says what is wrong in words. They are kept on the
assignment (Assignment.hidden_cases), travel to the grader in the grading run's job
(RunJob.hidden_cases), and reach no learner: no page or answer a learner gets names them, and
the grading run's result reports each one as right or wrong without its shape.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from kplay.app.db.classroom import Assignment, Submission
from kplay.app.db.session import Database
from kplay.app.services import cohorts as co
from kplay.app.services.access import Viewer
from kplay.app.services.runs import RunService
from kplay.kernels import hiddencases
from kplay.kernels.models import GradingCase

FIELD = "hidden_cases"


def of_row(row: Assignment | None, exercise: str) -> list[GradingCase]:
    """The exercise's hidden cases as the grader takes them (none where it has none)."""
    stored = (row.hidden_cases or {}) if row is not None else {}
    return [GradingCase.model_validate(c) for c in stored.get(exercise, [])]


def grading_options(db: Database, run_id: str) -> dict[str, Any]:
    """A grading run's job options from its submission's assignment (none for another run):
    what a run queued again from the database needs to be graded as it was at first."""
    with db.session() as s:
        sub = s.scalars(select(Submission).where(Submission.graded_run_id == run_id)).first()
        row = s.get(Assignment, sub.assignment_id) if sub is not None else None
        if sub is None or row is None:
            return {}
        return {
            "secret_seed": row.hidden_seed,
            "hidden_cases": of_row(row, sub.exercise),
            "device": row.device_kind,
        }


def parameters(runs: RunService, exercise: str) -> list[str]:
    """The case parameters of an exercise's problem, for the form's hint."""
    try:
        problem = runs.catalog.get(runs.book.cell(exercise).problem)
    except KeyError:
        return []
    return list(problem.params) if problem is not None else []


def as_toml(cases: list[GradingCase]) -> str:
    """The cases written back in problem.toml's notation, for the instructor's form."""
    blocks = []
    for case in cases:
        params = ", ".join(f"{k} = {_toml_value(v)}" for k, v in case.params.items())
        name = case.name.replace("\\", "\\\\").replace('"', '\\"')
        blocks.append(f'[[tests]]\nname = "{name}"\nparams = {{ {params} }}\nseed = {case.seed}\n')
    return "\n".join(blocks)


def _toml_value(value: int | float) -> str:
    return repr(float(value)) if isinstance(value, float) else str(int(value))


class GradingCases:
    """Reading and setting an assignment's hidden cases: for those who teach its cohort only."""

    def __init__(self, runs: RunService) -> None:
        self.runs = runs
        self.db = runs.db
        self.cohorts = co.Cohorts(runs.db)

    def _taught(self, viewer: Viewer, assignment_id: int) -> Assignment:
        """The assignment's row for one who teaches its cohort; as missing for anyone else."""
        row, cohort = self.cohorts.assignment(viewer, assignment_id)
        if not cohort.teaching:
            raise co.CohortError(403, "only the cohort's instructors see or set hidden cases")
        return row

    def read(self, viewer: Viewer, assignment_id: int) -> dict[str, list[GradingCase]]:
        """Every exercise of the assignment with its hidden cases (an empty list: none)."""
        row = self._taught(viewer, assignment_id)
        return {ex: of_row(row, ex) for ex in row.exercises or []}

    def set(
        self, viewer: Viewer, assignment_id: int, exercise: str, text: str
    ) -> list[GradingCase]:
        """Replace one exercise's hidden cases with those `text` writes (blank: none)."""
        row = self._taught(viewer, assignment_id)
        if exercise not in (row.exercises or []):
            shown = exercise[:80].encode("unicode_escape").decode()
            raise co.CohortError(422, f"exercise {shown!r} is not part of this assignment", FIELD)
        problem = self.runs.catalog.get(self.runs.book.cell(exercise).problem)
        if problem is None:  # the book names only problems of the catalog; kept for safety
            raise co.CohortError(422, f"exercise {exercise!r} has no problem to check", FIELD)
        try:
            cases = hiddencases.parse_and_validate(problem, text) if text.strip() else []
        except hiddencases.HiddenCaseError as exc:
            raise co.CohortError(422, str(exc), FIELD) from None
        with self.db.session() as s:
            stored = s.get(Assignment, assignment_id)
            if stored is None:
                raise co.CohortError(404, f"no assignment {assignment_id}")
            kept: dict[str, Any] = dict(stored.hidden_cases or {})
            if cases:
                kept[exercise] = [c.model_dump(mode="json") for c in cases]
            else:
                kept.pop(exercise, None)
            stored.hidden_cases = kept or None
        return cases


def public(cases: dict[str, list[GradingCase]]) -> dict[str, list[dict[str, Any]]]:
    """Hidden cases as an instructor's answer shows them."""
    return {ex: [c.model_dump(mode="json") for c in found] for ex, found in cases.items()}
