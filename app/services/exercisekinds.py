"""Grading the exercise kinds (app.services.exercisespec): a fix cell by its runs, a predict
cell by its prediction against what the run measured, a profile cell by the answers to its
questions, checked here against values computed from the stored profile.

A prediction is stored, committed, before its run is created and handed to a worker; the run
is then linked to it, once, and from that moment the prediction can no longer change.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import select, update

from kplay.app.book import CellSpec
from kplay.app.db.exercisemodels import Prediction, ProfileAnswer
from kplay.app.db.models import Run, utcnow
from kplay.app.services.exercisespec import (
    VERDICTS,
    FixExercise,
    PredictExercise,
    ProfileExercise,
)
from kplay.app.services.exercisestate import (
    AnswersState,
    FixState,
    PredictionState,
    measured,
    off_by,
    shown,
)
from kplay.app.services.problems import BackendOffer, offers
from kplay.app.services.profilequiz import read_number
from kplay.app.services.runs import RunInputError, RunRequest, RunService
from kplay.kernels.problem import ProblemSpec

# Checking that a prediction has no run yet and linking the new run to it happen under one
# lock, so one prediction never gets two runs (one web process, as for the runs' own cap).
_LINK = threading.Lock()


class ExerciseError(Exception):
    """A request refused; `status` is the HTTP status that fits it."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def exercise_offers(problem: ProblemSpec, spec: CellSpec) -> list[BackendOffer]:
    """The cell's backends with their starters: a fix cell's is its wrong kernel."""
    found = offers(problem, spec.backends)
    ex = spec.exercise
    if not isinstance(ex, FixExercise):
        return found
    return [
        BackendOffer(o.key, o.title, o.language, ex.starter_text, o.launch)
        if o.key == ex.backend
        else o
        for o in found
    ]


class ExerciseService:
    def __init__(self, runs: RunService) -> None:
        self.runs = runs
        self.db = runs.db
        self._link = _LINK

    # ------------------------------------------------------------ cells

    def cell(self, cell_id: str, kind: str | None = None) -> CellSpec:
        try:
            spec = self.runs.book.cell(cell_id)
        except KeyError:
            raise ExerciseError(404, f"unknown cell {cell_id!r}") from None
        ex = spec.exercise
        if ex is None:
            raise ExerciseError(404, f"cell {cell_id!r} is not an exercise of another kind")
        if kind is not None and ex.kind != kind:
            raise ExerciseError(422, f"cell {cell_id!r} is a {ex.kind} exercise, not {kind}")
        return spec

    # ------------------------------------------------------------ predict

    def _parse(self, ex: PredictExercise, raw: str) -> tuple[float | None, str | None]:
        raw = raw.strip()
        if not raw:
            raise ExerciseError(422, "prediction: write your prediction before you run")
        if ex.quantity == "verdict":
            if raw not in VERDICTS:
                raise ExerciseError(
                    422,
                    f"prediction: {raw!r} is not a verdict; choose one of {', '.join(VERDICTS)}",
                )
            return None, raw
        number = read_number(raw)
        if number is None:
            raise ExerciseError(422, f"prediction: {raw!r} is not a number ({ex.unit})")
        return number, None

    def open_prediction(self, cell_id: str, user: str) -> Prediction | None:
        """The reader's latest prediction of the cell, if no run has taken it yet."""
        latest = self.latest(cell_id, user)
        return latest if latest is not None and latest.run_id is None else None

    def latest(self, cell_id: str, user: str) -> Prediction | None:
        stmt = (
            select(Prediction)
            .where(Prediction.cell_id == cell_id, Prediction.user == user)
            .order_by(Prediction.id.desc())
            .limit(1)
        )
        with self.db.session() as s:
            return s.scalars(stmt).first()

    def get(self, prediction_id: int, user: str) -> Prediction:
        with self.db.session() as s:
            found = s.get(Prediction, prediction_id)
        if found is None or found.user != user:
            raise ExerciseError(404, f"no prediction {prediction_id}")
        return found

    def predict(self, cell_id: str, user: str, raw: str) -> Prediction:
        """Store a prediction (or change the open one): committed before any run of it."""
        ex = self.cell(cell_id, "predict").exercise
        value, choice = self._parse(ex, raw)
        with self._link, self.db.session() as s:
            stmt = (
                select(Prediction)
                .where(Prediction.cell_id == cell_id, Prediction.user == user)
                .order_by(Prediction.id.desc())
                .limit(1)
            )
            row = s.scalars(stmt).first()
            if row is None or row.run_id is not None:
                row = Prediction(user=user, cell_id=cell_id, quantity=ex.quantity)
                s.add(row)
            row.value, row.choice, row.updated_at = value, choice, utcnow()
            s.flush()
            s.refresh(row)
            s.expunge(row)
        return row

    def change(self, prediction_id: int, user: str, raw: str) -> Prediction:
        """A new value for a prediction, refused once its run has started."""
        row = self.get(prediction_id, user)
        ex = self.cell(row.cell_id, "predict").exercise
        value, choice = self._parse(ex, raw)
        with self._link, self.db.session() as s:
            changed = s.execute(
                update(Prediction)
                .where(Prediction.id == prediction_id, Prediction.run_id.is_(None))
                .values(value=value, choice=choice, updated_at=utcnow())
            ).rowcount
        if not changed:
            raise ExerciseError(
                409,
                "this prediction's run has started: a prediction cannot change after "
                "its run; make a new prediction for your next run",
            )
        return self.get(prediction_id, user)

    def run(self, prediction_id: int, user: str, req: RunRequest) -> Run:
        """The run of a stored prediction: created and handed over, then linked to it."""
        row = self.get(prediction_id, user)
        if req.cell != row.cell_id:
            raise ExerciseError(422, f"prediction {prediction_id} is for cell {row.cell_id!r}")
        with self._link:
            with self.db.session() as s:
                current = s.get(Prediction, prediction_id)
                if current is None or current.run_id is not None:
                    raise ExerciseError(
                        409, "this prediction already has its run; make a new prediction"
                    )
            try:
                run = self.runs.create(req, user, predicted=True)
            except RunInputError as exc:
                raise ExerciseError(exc.status, exc.message) from None
            with self.db.session() as s:
                s.execute(
                    update(Prediction)
                    .where(Prediction.id == prediction_id)
                    .values(run_id=run.id, updated_at=utcnow())
                )
        return run

    def run_cell(self, user: str, req: RunRequest) -> Run:
        """A run asked for by cell (the API's POST /runs): on a predict cell, the run of the
        reader's open prediction; without one, RunService refuses it (RunInputError)."""
        try:
            spec = self.runs.book.cell(req.cell) if req.cell is not None else None
        except KeyError:
            spec = None  # RunService names the unknown cell
        predicts = spec is not None and isinstance(spec.exercise, PredictExercise)
        open_row = self.open_prediction(spec.id, user) if spec is not None and predicts else None
        if open_row is None:
            return self.runs.create(req, user)
        return self.run(open_row.id, user, req)

    def predict_and_run(self, cell_id: str, user: str, raw: str, req: RunRequest) -> Run:
        """The page's Run button on a predict cell: the prediction first, then its run."""
        row = self.predict(cell_id, user, raw)
        return self.run(row.id, user, req)

    def prediction_state(self, ex: PredictExercise, row: Prediction) -> PredictionState:
        predicted = shown(ex, row.choice if ex.quantity == "verdict" else row.value)
        state = PredictionState(row.id, predicted, row.run_id is not None, row.run_id)
        if row.run_id is None:
            state.note = "Stored. It is locked when you press Run."
            return state
        try:
            run = self.runs.get(row.run_id)
        except KeyError:
            state.note = "Its run is gone."
            return state
        value, why = measured(ex, run)
        state.measured = shown(ex, value)
        if value is None:
            state.note = why
            return state
        if ex.quantity == "verdict":
            state.within = value == row.choice
        else:
            assert ex.tolerance is not None and isinstance(value, float) and row.value is not None
            state.within = ex.tolerance.allows(row.value, value)
            state.note = off_by(ex, row.value, value)
        return state

    # ------------------------------------------------------------ fix

    def fix_state(self, spec: CellSpec, user: str) -> FixState:
        runs = self.runs.history(spec.id, user, limit=50)
        fixed = any(r.state == "done" and _check_ok(r) for r in runs)
        if fixed:
            note = "Fixed: a run of yours passed every check."
        elif not runs:
            note = "Not run yet: run the kernel as it is and read what the check says."
        elif runs[0].state == "compiled":
            note = "Compiled only: this server cannot check this backend; run it on a GPU."
        else:
            note = f"Not fixed yet: the latest run did not pass its checks. {spec.exercise.task}"
        return FixState(fixed, self.runs.count(spec.id, user), note)

    # ------------------------------------------------------------ profile

    def answer(self, cell_id: str, user: str, given: dict[str, str]) -> AnswersState:
        """Grade the answers given (any subset of the questions) and store them."""
        ex = self.cell(cell_id, "profile").exercise
        assert isinstance(ex, ProfileExercise)
        unknown = sorted(set(given) - {q.id for q in ex.questions})
        if unknown:
            raise ExerciseError(422, f"no question {unknown[0]!r} in cell {cell_id!r}")
        graded: dict[str, bool] = {}
        for q in ex.questions:
            if given.get(q.id, "").strip():
                if len(given[q.id]) > 200:
                    raise ExerciseError(422, f"{q.id}: an answer of at most 200 characters")
                try:
                    graded[q.id] = q.grade(given[q.id])
                except ValueError as exc:
                    raise ExerciseError(422, str(exc)) from None
        if not graded:
            raise ExerciseError(422, "no answer given: answer at least one question")
        now, total = utcnow(), len(ex.questions)  # one check: one time for its rows
        with self.db.session() as s:
            for qid, ok in graded.items():
                answer = given[qid].strip()
                s.add(
                    ProfileAnswer(
                        user=user,
                        cell_id=cell_id,
                        question=qid,
                        answer=answer,
                        correct=ok,
                        questions=total,
                        created_at=now,
                    )
                )
        return self.answers_state(ex, cell_id, user)

    def answers_state(self, ex: ProfileExercise, cell_id: str, user: str) -> AnswersState:
        stmt = (
            select(ProfileAnswer)
            .where(ProfileAnswer.cell_id == cell_id, ProfileAnswer.user == user)
            .order_by(ProfileAnswer.id)
        )
        state = AnswersState(total=len(ex.questions))
        with self.db.session() as s:
            for row in s.scalars(stmt):
                state.given[row.question] = row.answer
                state.right[row.question] = row.correct
        return state

    # ------------------------------------------------------------ any kind

    def state(self, spec: CellSpec, user: str) -> Any:
        ex = spec.exercise
        if isinstance(ex, FixExercise):
            return self.fix_state(spec, user)
        if isinstance(ex, PredictExercise):
            row = self.latest(spec.id, user)
            return self.prediction_state(ex, row) if row is not None else None
        if isinstance(ex, ProfileExercise):
            return self.answers_state(ex, spec.id, user)
        return None


def _check_ok(run: Run) -> bool:
    check = (run.result or {}).get("check") or {}
    return bool(check.get("ok"))
