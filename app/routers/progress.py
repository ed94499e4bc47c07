"""A reader's progress (`/progress`, `/api/v1/progress`) and the exercises' leaderboards
(`/leaderboards/<problem>`, `/api/v1/leaderboards/<problem>`).

Thin: app.services.progressview and app.services.leaderboards decide everything. Progress
is the asker's own (their runs only); a board is public and carries neither run ids nor
sources.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, Response

from kplay.app.deps import ServicesDep, UserDep
from kplay.app.render import error_page, render
from kplay.app.routers.api import errors
from kplay.app.services import cohorts, leaderboards, progressview
from kplay.app.services.access import Viewer
from kplay.app.services.boardnames import names_key
from kplay.app.services.problems import backend_title
from kplay.app.sessionkey import session_secret

router = APIRouter(include_in_schema=False)
api_router = APIRouter(prefix="/api/v1", tags=["api"])

# A filter's value: printable, and short (PostgreSQL refuses a NUL in text).
FILTER = r"^[^\x00-\x1f\x7f]*$"
Filter = Annotated[str | None, Query(max_length=200, pattern=FILTER)]
CohortFilter = Annotated[int | None, Query(ge=1, le=cohorts.MAX_ID)]


def _db(services: ServicesDep) -> Any:
    if services.db is None:
        raise RuntimeError("the app has not started: use it inside its lifespan")
    return services.db


def _key(request: Request, services: ServicesDep) -> bytes:
    """The board names' key, derived once per app from its secret key."""
    key = getattr(request.app.state, "board_names_key", None)
    if key is None:
        key = request.app.state.board_names_key = names_key(session_secret(services.settings))
    return bytes(key)


def _page(services: ServicesDep, user: str) -> progressview.ProgressPage:
    return progressview.progress_page(services.book, services.catalog, _db(services), user)


@router.get("/progress", response_class=HTMLResponse)
def progress(request: Request, services: ServicesDep, user: UserDep) -> Response:
    return render(request, services, "progress.html", page=_page(services, user))


@api_router.get(
    "/progress",
    summary="Your progress: each exercise's state, tier, attempts, times and time spent",
    description="The asker's own runs only (the session's reader, or the account of a bearer "
    "token). Per part and chapter, each exercise cell: `state` (untried, running, wrong, "
    "correct, tier), `tier` (the best run's), `attempts`, the first and best kernel times "
    "(median µs of correct timed runs), and `time_spent_s`, counted as `counted_how` says. "
    "`elsewhere` lists runs outside the book's cells (the catalog's own cells, API runs), per "
    "problem.",
)
def progress_api(services: ServicesDep, user: UserDep) -> dict[str, Any]:
    return _page(services, user).public()


def _board(
    request: Request,
    services: ServicesDep,
    user: str,
    slug: str,
    device: str | None,
    case: str | None,
    backend: str | None,
    cohort: int | None = None,
) -> leaderboards.Board:
    problem = services.catalog.get(slug)
    if problem is None:
        raise HTTPException(status_code=404, detail=f"unknown problem {slug!r}")
    group, owners = None, None
    if cohort is not None:  # its members' runs, for its members and instructors only
        store = cohorts.Cohorts(_db(services))
        viewer = user if isinstance(user, Viewer) else Viewer(user)
        try:
            group = store.view(viewer, cohort)
        except cohorts.CohortError as exc:
            raise HTTPException(status_code=exc.status, detail=exc.message) from None
        owners = store.member_owners(cohort)
    board = leaderboards.leaderboard(
        _db(services),
        problem,
        _key(request, services),
        user,
        device=device or None,
        case=case or None,
        backend=backend or None,
        owners=owners,
    )
    if group is None:
        return board
    return replace(board, cohort=group.id, cohort_name=group.name)


@router.get("/leaderboards/{slug}", response_class=HTMLResponse)
def leaderboard(
    slug: str,
    request: Request,
    services: ServicesDep,
    user: UserDep,
    device: Filter = None,
    case: Filter = None,
    backend: Filter = None,
    cohort: CohortFilter = None,
) -> Response:
    try:
        board = _board(request, services, user, slug, device, case, backend, cohort)
    except HTTPException as exc:
        if exc.status_code == 404 and str(exc.detail).startswith("no cohort"):
            return error_page(request, services, 404, f"There is {exc.detail}.")
        return error_page(request, services, exc.status_code, f"There is no problem {slug!r}.")
    return render(request, services, "leaderboard.html", page=board, backend_title=backend_title)


@api_router.get(
    "/leaderboards/{slug}",
    summary="A problem's leaderboard: the best verified run of each reader",
    description="Only verified runs count: done, timed on real hardware on secret seeds, "
    "every checked repetition right, within the device's ceilings (a suspicious run never "
    "appears). One board per device and benchmark case (`boards` lists those with entries; "
    "without `device` and `case` the one with the most entrants is shown); `backend` narrows "
    "it to one backend. Each reader's best run, fastest median first, ties to the earlier "
    "submission. Rows carry a public name, never a run id or source. `mine` marks the "
    "asker's own row, which is included even below the first 100. `cohort` narrows it to a "
    "cohort's members, for its members and instructors only (404 for anyone else).",
    responses=errors(404, 422),
)
def leaderboard_api(
    slug: str,
    request: Request,
    services: ServicesDep,
    user: UserDep,
    device: Filter = None,
    case: Filter = None,
    backend: Filter = None,
    cohort: CohortFilter = None,
) -> dict[str, Any]:
    return _board(request, services, user, slug, device, case, backend, cohort).public()
