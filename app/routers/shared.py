"""Share and compare: the owner's Share action on a run card, a shared run's read-only page
and JSON (anyone holding the link), and any two attempts of a cell side by side.

Every decision is made in app.services.sharing and app.services.history; these handlers only
turn its refusals into the asker's kind of answer (a fragment, a page or JSON).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, Field

from kplay.app.deps import RunsDep, ServicesDep, UserDep
from kplay.app.render import error_page, render
from kplay.app.routers.api import errors
from kplay.app.routers.runs_html import from_our_page
from kplay.app.schemas import ErrorOut
from kplay.app.services import history as hist
from kplay.app.services import sharing
from kplay.app.services.sharing import ShareError

router = APIRouter(include_in_schema=False)
api_router = APIRouter(prefix="/api/v1", tags=["api"])

SHARE_REFUSED: dict[int | str, dict[str, Any]] = {
    403: {"model": ErrorOut, "description": "sent by a page of another web site"},
    409: {"model": ErrorOut, "description": "the run has not finished yet"},
}
NO_SHARED_RUN: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "no shared run has this token"},
}


class SharedLink(BaseModel):
    token: str = Field(description="the link's secret part; whoever holds it reads the run")
    url: str = Field(description="the read-only page, /shared/{token}")
    api_url: str = Field(description="the same run as JSON, /api/v1/shared/{token}")


class SharedRunOut(BaseModel):
    token: str
    url: str
    problem: str
    problem_title: str
    backend: str
    cell: str | None = Field(description="the kernel cell it was made in; none for an API run")
    chapter: str | None
    fork_url: str | None = Field(
        description="the cell's page, which loads this source and launch into the reader's "
        "own editor; none when the run has no cell in the book"
    )
    created_at: datetime
    finished_at: datetime | None
    state: str
    verdict: str
    source: str
    launch: dict[str, Any] | None
    launch_fields: dict[str, str] = Field(description="the launch as the cell's fields hold it")
    median_us: float | None
    percent_of_roofline: float | None
    result: dict[str, Any] | None


def _link(token: str) -> SharedLink:
    return SharedLink(
        token=token, url=sharing.shared_path(token), api_url=f"/api/v1/shared/{token}"
    )


# ---------------------------------------------------------------- pages and fragments


@router.post(
    "/runs/{run_id}/share", response_class=HTMLResponse, dependencies=[Depends(from_our_page)]
)
def share_run(
    run_id: str, request: Request, services: ServicesDep, runs: RunsDep, user: UserDep
) -> Response:
    """The share box of a run card, with the run's link (minted on the first share)."""
    try:
        token = sharing.share(runs, run_id, user)
    except ShareError as exc:
        return render(
            request, services, "shared_link.html", status_code=exc.status, message=exc.message
        )
    url = str(request.url_for("shared_page", token=token))
    return render(request, services, "shared_link.html", url=url, link=_link(token))


@router.get("/shared/{token}", response_class=HTMLResponse, name="shared_page")
def shared_page(token: str, request: Request, services: ServicesDep, runs: RunsDep) -> Response:
    try:
        page = sharing.shared_page(runs, token)
    except ShareError as exc:
        return error_page(request, services, exc.status, exc.message)
    return render(request, services, "shared.html", page=page, read_only=True)


@router.get("/cells/{cell_id}/compare", response_class=HTMLResponse)
def compare_attempts(
    cell_id: str,
    request: Request,
    services: ServicesDep,
    runs: RunsDep,
    user: UserDep,
    run: Annotated[list[str] | None, Query()] = None,
) -> Response:
    """Two of the reader's attempts of a cell (`?run=<id>&run=<id>`), side by side."""
    fragment = "fragments/compare.html"
    try:
        services.book.cell(cell_id)
    except KeyError:
        return render(
            request, services, fragment, status_code=404, error=f"unknown cell {cell_id!r}"
        )
    try:
        comparison = hist.compare(runs, cell_id, run or [], user)
    except hist.CompareError as exc:
        return render(request, services, fragment, status_code=exc.status, error=exc.message)
    return render(request, services, fragment, comparison=comparison)


# ---------------------------------------------------------------- JSON


@api_router.post(
    "/runs/{run_id}/share",
    response_model=SharedLink,
    summary="Share a run: a permanent read-only link",
    description="Only the session that started the run can share it, and only once it has "
    "finished. Sharing again answers with the same link. Anyone holding the link reads the "
    "run's source, launch, verdict and numbers, but never its owner's other runs.",
    responses={**errors(404), **SHARE_REFUSED},
)
def share_run_api(run_id: str, request: Request, runs: RunsDep, user: UserDep) -> SharedLink:
    if request.headers.get("sec-fetch-site") == "cross-site":
        raise HTTPException(
            status_code=403, detail="runs are shared from this site's pages, not another's"
        )
    try:
        token = sharing.share(runs, run_id, user)
    except ShareError as exc:
        raise HTTPException(status_code=exc.status, detail=exc.message) from None
    return _link(token)


@api_router.get(
    "/shared/{token}",
    response_model=SharedRunOut,
    summary="A shared run, read-only, for anyone with its link",
    responses=NO_SHARED_RUN,
)
def shared_run_api(token: str, runs: RunsDep) -> dict[str, Any]:
    try:
        return sharing.shared_json(runs, token)
    except ShareError as exc:
        raise HTTPException(status_code=exc.status, detail=exc.message) from None
