"""The exercise kinds' endpoints: a predict cell's Run (prediction first, then the run), the
panel of a cell's exercise, a profile cell's answers; and the same through the JSON API.

Every decision is made in app.services.exercisekinds; the answer key of a profile cell never
leaves it (only `ProfileQuestion.public()` is shown).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, HTTPException, Path, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from kplay.app.deps import RunsDep, ServicesDep, UserDep
from kplay.app.localmode import local_runs_only
from kplay.app.ratelimit import limit_run_starts
from kplay.app.render import render
from kplay.app.routers.runs_html import error_card, from_our_page
from kplay.app.services import views
from kplay.app.services.exercisekinds import ExerciseError, ExerciseService
from kplay.app.services.exercisespec import FixExercise, PredictExercise, ProfileExercise
from kplay.app.services.launch_input import LaunchInputError, override_from_form
from kplay.app.services.runs import RunRequest
from kplay.kernels.models import LaunchOverride

router = APIRouter(include_in_schema=False)
api_router = APIRouter(prefix="/api/v1", tags=["exercises"])
FormText = Annotated[str, Form()]
# A prediction's number: a database integer (PostgreSQL refuses a larger one with an error).
PredictionId = Annotated[int, Path(ge=1, le=2**31 - 1, description="the prediction's number")]
STATE = "fragments/exercise_state.html"


@router.post(
    "/cells/{cell_id}/predicted-runs",
    response_class=HTMLResponse,
    dependencies=[Depends(from_our_page), Depends(local_runs_only), Depends(limit_run_starts)],
)
def predicted_run(
    cell_id: str,
    request: Request,
    services: ServicesDep,
    runs: RunsDep,
    user: UserDep,
    prediction: FormText = "",
    backend: FormText = "",
    source: FormText = "",
    grid: FormText = "",
    block: FormText = "",
    shared_mem_bytes: FormText = "",
    num_warps: FormText = "",
    num_stages: FormText = "",
    constants: FormText = "",
    device: FormText = "",
) -> Response:
    """A predict cell's Run: the prediction is stored, then the run made and linked to it."""
    exercises = ExerciseService(runs)
    try:
        spec = exercises.cell(cell_id, "predict")
        launch = override_from_form(grid, block, shared_mem_bytes, num_warps, num_stages, constants)
        req = RunRequest(spec.problem, backend, source, spec.id, launch, device=device or None)
        run = exercises.predict_and_run(cell_id, user, prediction, req)
    except LaunchInputError as exc:
        return error_card(request, services, 422, f"launch fields: {exc}")
    except ExerciseError as exc:
        return error_card(request, services, exc.status, exc.message)
    card = views.run_card(runs, run.id, user)
    return render(request, services, "fragments/run_card.html", status_code=201, card=card)


@router.get("/cells/{cell_id}/exercise", response_class=HTMLResponse)
def exercise_panel(
    cell_id: str, request: Request, services: ServicesDep, runs: RunsDep, user: UserDep
) -> Response:
    """The panel under a fix or predict cell: fixed or not; prediction against measurement."""
    exercises = ExerciseService(runs)
    try:
        spec = exercises.cell(cell_id)
    except ExerciseError as exc:
        return error_card(request, services, exc.status, exc.message)
    state = exercises.state(spec, user)
    return render(request, services, STATE, spec=spec, ex=spec.exercise, state=state)


@router.post(
    "/cells/{cell_id}/answers", response_class=HTMLResponse, dependencies=[Depends(from_our_page)]
)
async def answer_html(
    cell_id: str, request: Request, services: ServicesDep, runs: RunsDep, user: UserDep
) -> Response:
    """A profile cell's Check answers: each answer graded here, the key kept here."""
    form = await request.form()
    given = {str(k): str(v) for k, v in form.items() if str(k).startswith("q")}
    exercises = ExerciseService(runs)
    try:
        state = exercises.answer(cell_id, user, given)
        spec = exercises.cell(cell_id, "profile")
    except ExerciseError as exc:
        return error_card(request, services, exc.status, exc.message)
    return render(request, services, STATE, spec=spec, ex=spec.exercise, state=state)


# ------------------------------------------------------------------ JSON


class PredictionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: str = Field(description="a number in the quantity's unit, or a verdict's key")


class PredictedRunIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    backend: str
    source: str
    launch: LaunchOverride | None = None


class AnswersIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answers: dict[str, str] = Field(description="question id (q1, q2, ...) -> the answer")


def _http(exc: ExerciseError) -> HTTPException:
    return HTTPException(status_code=exc.status, detail=exc.message)


def describe(spec: Any) -> dict[str, Any]:
    """A cell's exercise as the API shows it: what is asked, never the answers."""
    ex = spec.exercise
    out: dict[str, Any] = {"cell": spec.id, "kind": ex.kind, "problem": spec.problem}
    if isinstance(ex, FixExercise):
        # Not the wrong kernel's file name: it names the bug.
        out.update(task=ex.task, backend=ex.backend)
    elif isinstance(ex, PredictExercise):
        out.update(
            question=ex.question,
            quantity=ex.quantity,
            label=ex.label,
            unit=ex.unit,
            tolerance=ex.tolerance_words or None,
            choices=[{"value": v, "label": w} for v, w in ex.choices],
        )
    elif isinstance(ex, ProfileExercise):
        out.update(
            profile=ex.profile.title,
            device=ex.profile.device,
            questions=[q.public() for q in ex.questions],
        )
    return out


@api_router.get("/cells/{cell_id}/exercise", summary="A cell's exercise and your standing")
def exercise_json(cell_id: str, runs: RunsDep, user: UserDep) -> dict[str, Any]:
    exercises = ExerciseService(runs)
    try:
        spec = exercises.cell(cell_id)
    except ExerciseError as exc:
        raise _http(exc) from None
    state = exercises.state(spec, user)
    return {**describe(spec), "state": state.public() if state is not None else None}


@api_router.post("/cells/{cell_id}/predictions", status_code=201, summary="Store a prediction")
def create_prediction(
    cell_id: str, body: PredictionIn, runs: RunsDep, user: UserDep
) -> dict[str, Any]:
    exercises = ExerciseService(runs)
    try:
        spec = exercises.cell(cell_id, "predict")
        row = exercises.predict(cell_id, user, body.value)
    except ExerciseError as exc:
        raise _http(exc) from None
    return exercises.prediction_state(spec.exercise, row).public()


@api_router.get("/predictions/{prediction_id}", summary="A prediction and its grade")
def read_prediction(prediction_id: PredictionId, runs: RunsDep, user: UserDep) -> dict[str, Any]:
    exercises = ExerciseService(runs)
    try:
        row = exercises.get(prediction_id, user)
        spec = exercises.cell(row.cell_id, "predict")
    except ExerciseError as exc:
        raise _http(exc) from None
    return exercises.prediction_state(spec.exercise, row).public()


@api_router.put("/predictions/{prediction_id}", summary="Change a prediction (only before its run)")
def change_prediction(
    prediction_id: PredictionId, body: PredictionIn, runs: RunsDep, user: UserDep
) -> dict[str, Any]:
    exercises = ExerciseService(runs)
    try:
        row = exercises.change(prediction_id, user, body.value)
        spec = exercises.cell(row.cell_id, "predict")
    except ExerciseError as exc:
        raise _http(exc) from None
    return exercises.prediction_state(spec.exercise, row).public()


@api_router.post(
    "/predictions/{prediction_id}/run",
    status_code=201,
    summary="Run the kernel a prediction is about",
    dependencies=[Depends(local_runs_only), Depends(limit_run_starts)],
)
def run_prediction(
    prediction_id: PredictionId, body: PredictedRunIn, runs: RunsDep, user: UserDep
) -> dict[str, Any]:
    exercises = ExerciseService(runs)
    try:
        row = exercises.get(prediction_id, user)
        spec = exercises.cell(row.cell_id, "predict")
        req = RunRequest(spec.problem, body.backend, body.source, spec.id, body.launch)
        run = exercises.run(prediction_id, user, req)
    except ExerciseError as exc:
        raise _http(exc) from None
    return {
        "prediction": prediction_id,
        "run": run.id,
        "state": run.state,
        "url": f"/api/v1/runs/{run.id}",
    }


@api_router.post("/cells/{cell_id}/answers", summary="Answer a stored profile's questions")
def answer_json(cell_id: str, body: AnswersIn, runs: RunsDep, user: UserDep) -> dict[str, Any]:
    exercises = ExerciseService(runs)
    try:
        state = exercises.answer(cell_id, user, body.answers)
    except ExerciseError as exc:
        raise _http(exc) from None
    return state.public()
