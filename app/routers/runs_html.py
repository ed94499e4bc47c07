"""HTML fragments of a kernel cell: submit a run, follow its card, list its attempts."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, Response

from kplay.app.deps import RunsDep, ServicesDep, UserDep
from kplay.app.localmode import local_runs_only
from kplay.app.ratelimit import limit_run_starts
from kplay.app.render import render
from kplay.app.services import views
from kplay.app.services.launch_input import LaunchInputError, override_from_form
from kplay.app.services.runs import RunInputError, RunNotFound, RunRequest

router = APIRouter(include_in_schema=False)
FormText = Annotated[str, Form()]


def from_our_page(request: Request) -> None:
    """A run starts only from the playground's own script, which sends HX-Request.

    A form on another web site cannot set that header, so it cannot make this server run
    code on a reader's behalf (the JSON API is covered by its content type).
    """
    cross_site = request.headers.get("sec-fetch-site") == "cross-site"
    if request.headers.get("hx-request") != "true" or cross_site:
        raise HTTPException(status_code=403, detail="runs start from the playground's own pages")


def error_card(request: Request, services: ServicesDep, status: int, message: str) -> Response:
    """A refusal in the card's place (the run fragments and the exercise panels)."""
    return render(
        request, services, "fragments/input_error.html", status_code=status, message=message
    )


@router.post(
    "/cells/{cell_id}/runs",
    response_class=HTMLResponse,
    dependencies=[Depends(from_our_page), Depends(local_runs_only), Depends(limit_run_starts)],
)
def run_cell(
    cell_id: str,
    request: Request,
    services: ServicesDep,
    runs: RunsDep,
    user: UserDep,
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
    try:
        cell = services.book.cell(cell_id)
    except KeyError:
        return error_card(request, services, 404, f"unknown cell {cell_id!r}")
    try:
        launch = override_from_form(grid, block, shared_mem_bytes, num_warps, num_stages, constants)
        req = RunRequest(cell.problem, backend, source, cell.id, launch, device=device or None)
        run = runs.create(req, user)
    except LaunchInputError as exc:
        return error_card(request, services, 422, f"launch fields: {exc}")
    except RunInputError as exc:
        return error_card(request, services, exc.status, exc.message)
    card = views.run_card(runs, run.id, user)
    return render(request, services, "fragments/run_card.html", status_code=201, card=card)


@router.post(
    "/runs/{run_id}/profile",
    response_class=HTMLResponse,
    dependencies=[Depends(from_our_page), Depends(local_runs_only), Depends(limit_run_starts)],
)
def profile_run(
    run_id: str, request: Request, services: ServicesDep, runs: RunsDep, user: UserDep
) -> Response:
    """The Profile button: a profile run of `run_id`, answered with its (live) card."""
    try:
        run = runs.profile(run_id, user)
    except RunNotFound:
        return error_card(request, services, 404, f"no run {run_id!r}")
    except RunInputError as exc:
        return error_card(request, services, exc.status, exc.message)
    card = views.run_card(runs, run.id, user)
    return render(request, services, "fragments/run_card.html", status_code=201, card=card)


@router.get("/runs/{run_id}/card", response_class=HTMLResponse)
def run_card(
    run_id: str, request: Request, services: ServicesDep, runs: RunsDep, user: UserDep
) -> Response:
    # Another reader's run is "no run", as is one that does not exist.
    try:
        card = views.run_card(runs, run_id, user)
    except RunNotFound:
        return error_card(request, services, 404, f"no run {run_id!r}")
    return render(request, services, "fragments/run_card.html", card=card)


@router.get("/cells/{cell_id}/history", response_class=HTMLResponse)
def cell_history(
    cell_id: str, request: Request, services: ServicesDep, runs: RunsDep, user: UserDep
) -> Response:
    try:
        services.book.cell(cell_id)
    except KeyError:
        return error_card(request, services, 404, f"unknown cell {cell_id!r}")
    history = views.history_view(runs, cell_id, user)
    return render(request, services, "fragments/history.html", history=history)
