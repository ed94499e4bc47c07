"""The JSON API. Thin: every decision is made in app.services."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException
from fastapi.responses import Response

from kplay.app.db.models import Run
from kplay.app.deps import RunsDep, ServicesDep, UserDep
from kplay.app.localmode import local_runs_only
from kplay.app.ratelimit import limit_run_starts
from kplay.app.schemas import ErrorOut, ProblemSummary, RunCreate, RunCreated, RunOut, RunSummary
from kplay.app.services.exercisekinds import ExerciseError, ExerciseService
from kplay.app.services.problems import problem_summaries, public_problem
from kplay.app.services.runs import RunInputError, RunNotFound, RunRequest, RunService

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": text}
    for code, text in (
        (400, "malformed JSON"),
        (404, "no such run, cell or problem"),
        (413, "source or request body larger than the limit"),
        (422, "a field is missing or wrong; the message names it"),
        (409, "the run is not in a state that allows this (a profile needs a passed run)"),
    )
}
REFUSED: dict[int | str, dict[str, Any]] = {
    403: {
        "model": ErrorOut,
        "description": "trusted local mode: the server runs kernels without a sandbox and "
        "accepts runs only from its own machine",
    },
    429: {
        "model": ErrorOut,
        "description": "too many runs in flight for this reader, or started too quickly "
        "(then with Retry-After)",
    },
}
router = APIRouter(prefix="/api/v1", tags=["api"])


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The documented errors of one endpoint: only those it can answer with."""
    return {code: ERRORS[code] for code in codes}


def _created(run: Run, runs: RunService) -> RunCreated:
    """The answer to a new run: where it stands and where to read it."""
    return RunCreated(
        id=run.id,
        state=run.state,
        detail=run.detail,
        queue_position=runs.queue_position(run),
        url=f"/api/v1/runs/{run.id}",
    )


def _input_error(exc: RunInputError) -> HTTPException:
    return HTTPException(status_code=exc.status, detail=exc.message)


@router.post(
    "/runs",
    status_code=201,
    response_model=RunCreated,
    summary="Submit a kernel",
    description="The run belongs to the reader of the session cookie sent with the request; "
    "without one, a new session begins and its cookie comes back in the answer. Only that "
    "session can read the run afterwards.",
    responses={**errors(400, 404, 409, 413, 422), **REFUSED},
    dependencies=[Depends(local_runs_only), Depends(limit_run_starts)],
)
def create_run(body: RunCreate, runs: RunsDep, user: UserDep) -> RunCreated:
    request = RunRequest(
        problem=body.problem,
        backend=body.backend,
        source=body.source,
        cell=body.cell,
        launch=body.launch,
        requires=body.requires,
        device=body.device,
    )
    try:
        # A predict cell's run takes the reader's open prediction, or is refused without one.
        run = ExerciseService(runs).run_cell(user, request)
    except RunInputError as exc:
        raise _input_error(exc) from None
    except ExerciseError as exc:
        raise HTTPException(status_code=exc.status, detail=exc.message) from None
    return _created(run, runs)


@router.post(
    "/runs/{run_id}/profile",
    status_code=201,
    response_model=RunCreated,
    summary="Profile a run under Nsight Compute",
    description="Starts a profile run: the same kernel again on a GPU worker with Nsight Compute, "
    "profiling the benchmark case's launch. The run must have passed its checks. Its result "
    "carries `profile` (speed of light, memory, occupancy, stall reasons, the source lines "
    "ranked by stalls); the report itself is at `/runs/{id}/profile.ncu-rep`.",
    responses={**errors(404, 409, 422), **REFUSED},
    dependencies=[Depends(local_runs_only), Depends(limit_run_starts)],
)
def profile_run(run_id: str, runs: RunsDep, user: UserDep) -> RunCreated:
    try:
        run = runs.profile(run_id, user)
    except RunNotFound:
        raise HTTPException(status_code=404, detail=f"no run {run_id!r}") from None
    except RunInputError as exc:
        raise _input_error(exc) from None
    return _created(run, runs)


@router.get(
    "/runs/{run_id}/profile.ncu-rep",
    summary="A profile run's Nsight Compute report",
    response_class=Response,
    responses=errors(404),
)
def profile_report(run_id: str, runs: RunsDep, user: UserDep) -> Response:
    try:
        data = runs.report(run_id, user)
    except RunNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    return Response(
        data,
        media_type="application/octet-stream",
        headers={"Content-Disposition": f'attachment; filename="kplay-{run_id}.ncu-rep"'},
    )


@router.get(
    "/runs/{run_id}",
    response_model=RunOut,
    summary="A run: state, progress, result",
    description="Readable by its owner (the account or session that started it) and by an "
    "admin; any other gets 404.",
    responses=errors(404),
)
def get_run(run_id: str, runs: RunsDep, user: UserDep) -> RunOut:
    try:
        run, position = runs.watch(run_id, user)
    except RunNotFound:
        raise HTTPException(status_code=404, detail=f"no run {run_id!r}") from None
    return RunOut.full(run, position)


@router.get(
    "/cells/{cell_id}/runs",
    response_model=list[RunSummary],
    summary="A cell's runs, newest first",
    responses=errors(404),
)
def cell_runs(
    cell_id: str, runs: RunsDep, services: ServicesDep, user: UserDep
) -> list[RunSummary]:
    try:
        services.book.cell(cell_id)
    except KeyError:
        raise HTTPException(status_code=404, detail=f"unknown cell {cell_id!r}") from None
    return [RunSummary.of(r) for r in runs.history(cell_id, user)]


@router.get("/problems", response_model=list[ProblemSummary], summary="The problem catalog")
def problems(services: ServicesDep) -> list[dict[str, Any]]:
    return problem_summaries(services.catalog)


@router.get(
    "/problems/{slug}",
    summary="One problem's spec, with a starter per backend",
    responses=errors(404),
)
def problem(slug: str, services: ServicesDep) -> dict[str, Any]:
    spec = services.catalog.get(slug)
    if spec is None:
        raise HTTPException(status_code=404, detail=f"unknown problem {slug!r}")
    return public_problem(spec)


@router.get("/devices", summary="What can run jobs right now")
def devices(services: ServicesDep) -> list[dict[str, Any]]:
    if services.executor is None:
        return []
    return services.executor.devices()
