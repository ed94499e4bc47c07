"""A cohort's dashboard for its instructors: the page, its live updates, one learner's
attempts, and the gradebook as CSV.

Only the cohort's instructors and admins see any of it; anyone else (a learner of the cohort
included) gets 404, as for a cohort that does not exist. The page polls
/cohorts/{id}/dashboard/updates every few seconds with the cursor it has (the server's time
when it last asked, in microseconds since 1970) and gets back only the heatmap cells changed
since, swapped in place, with the summaries when any changed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from kplay.app.db.session import Database
from kplay.app.deps import Services, ServicesDep, UserDep
from kplay.app.render import error_page, render
from kplay.app.services import dashboard_learner as learner_view
from kplay.app.services import dashboard_view as view
from kplay.app.services.dashboard import EPOCH, OVERLAP, CohortState, Dashboards
from kplay.app.services.dashboard_roster import NotFound, Roster, may_watch, roster

router = APIRouter(include_in_schema=False)

POLL_S = 5
Fails = Annotated[
    int, Query(ge=1, le=1000, description="failed attempts that make a learner stuck")
]
Minutes = Annotated[
    int, Query(ge=0, le=100_000, description="minutes without a step forward to be stuck")
]
Members = Annotated[
    str,
    Query(
        pattern="^[0-9a-f]{0,16}$",
        description="the page's mark of the cohort's learners (Roster.members)",
    ),
]
Since = Annotated[int, Query(ge=0, le=2**62, description="the cursor: microseconds since 1970")]


def _db(services: Services) -> Database:
    if services.db is None:
        raise RuntimeError("the app has not started: use it inside its lifespan")
    return services.db


def _dashboards(request: Request) -> Dashboards:
    found = getattr(request.app.state, "dashboards", None)
    if found is None:
        found = request.app.state.dashboards = Dashboards()
    return found


def _watched(services: Services, user: str, cohort_id: int) -> Roster:
    """The cohort's roster when `user` may watch it; NotFound otherwise."""
    found = roster(_db(services), cohort_id)
    if not may_watch(found, user):
        raise NotFound(f"no cohort {cohort_id}")
    return found


def _missing(request: Request, services: Services, cohort_id: int) -> Response:
    return error_page(
        request,
        services,
        404,
        f"There is no cohort {cohort_id} that you teach. A cohort's dashboard is open to its "
        "instructors and to admins only: log in with such an account.",
    )


def cursor_of(when: datetime) -> int:
    """A moment as the page's cursor: whole microseconds since 1970."""
    return (when - EPOCH) // timedelta(microseconds=1)


def _context(
    request: Request,
    services: Services,
    cohort_id: int,
    user: str,
    fails: int,
    minutes: int,
) -> tuple[Roster, CohortState, list[view.Exercise], dict[str, Any]]:
    asked = datetime.now(UTC)
    found = _watched(services, user, cohort_id)
    state = _dashboards(request).state(_db(services), found, services.catalog)
    shown = view.exercises(services.book, found.exercises)
    context: dict[str, Any] = {
        "cursor": cursor_of(asked),
        "roster": found,
        "shown": shown,
        "fails": fails,
        "minutes": minutes,
        "poll_s": POLL_S,
    }
    return found, state, shown, context


def _stuck(
    found: Roster, state: CohortState, shown: list[view.Exercise], context: dict[str, Any]
) -> None:
    """The stuck list, read under the state's lock."""
    now = datetime.now(UTC)
    context["stuck"] = view.stuck(found, state, shown, now, context["fails"], context["minutes"])


def _summaries(found: Roster, state: CohortState, shown: list[view.Exercise]) -> dict[str, Any]:
    return {
        "clusters": view.clusters(state),
        "times": view.times(found, state, shown),
        "tally": view.tally(found, state, {e.id: e for e in shown}),
        "failures_ready": state.failures_ready,
    }


@router.get("/cohorts/{cohort_id}/dashboard", response_class=HTMLResponse)
def dashboard(
    cohort_id: int,
    request: Request,
    services: ServicesDep,
    user: UserDep,
    stuck_fails: Fails = view.STUCK_FAILS,
    stuck_minutes: Minutes = view.STUCK_MINUTES,
) -> Response:
    try:
        found, state, shown, context = _context(
            request, services, cohort_id, user, stuck_fails, stuck_minutes
        )
    except NotFound:
        return _missing(request, services, cohort_id)
    with state.lock:
        _stuck(found, state, shown, context)
        context.update(_summaries(found, state, shown))
        context["rows"] = view.heatmap(found, state, shown)
    page = render(request, services, "dashboard/page.html", page=found, **context)
    _dashboards(request).follow(state)  # a first read's failures, now that the page is made
    return page


@router.get("/cohorts/{cohort_id}/dashboard/updates", response_class=HTMLResponse)
def dashboard_updates(
    cohort_id: int,
    request: Request,
    services: ServicesDep,
    user: UserDep,
    since: Since = 0,
    stuck_fails: Fails = view.STUCK_FAILS,
    stuck_minutes: Minutes = view.STUCK_MINUTES,
    members: Members = "",
) -> Response:
    """The cells changed since the cursor (and a little before it: another process may
    have seen a run earlier), the stuck list, and the summaries when a cell changed after
    the cursor itself. A page whose learners are not the cohort's now (`members`, the mark
    it was made with, differs: someone joined or left) gets the whole heatmap again, with
    the summaries."""
    try:
        found, state, shown, context = _context(
            request, services, cohort_id, user, stuck_fails, stuck_minutes
        )
    except NotFound:
        return _missing(request, services, cohort_id)
    after = EPOCH + timedelta(microseconds=since) - OVERLAP
    with state.lock:
        _stuck(found, state, shown, context)
        changed = view.changed_cells(found, state, shown, after)
        # The summaries come again only with news since the cursor itself.
        if changed and view.changed_cells(
            found, state, shown, EPOCH + timedelta(microseconds=since)
        ):
            context.update(_summaries(found, state, shown))
        context["solved"] = view.solved(found, state, shown, changed)
        if members and members != found.members:
            context["rows"] = view.heatmap(found, state, shown)
            context.update(_summaries(found, state, shown))
    context["changed"] = changed
    page = render(request, services, "dashboard/updates.html", page=found, **context)
    _dashboards(request).follow(state)
    return page


@router.get("/cohorts/{cohort_id}/learners/{user_id}", response_class=HTMLResponse)
def learner(
    cohort_id: int, user_id: int, request: Request, services: ServicesDep, user: UserDep
) -> Response:
    try:
        found = _watched(services, user, cohort_id)
    except NotFound:
        return _missing(request, services, cohort_id)
    who = found.learner(user_id)
    if who is None:
        return error_page(
            request, services, 404, f"Cohort {found.name!r} has no learner {user_id}."
        )
    shown = view.exercises(services.book, found.exercises)
    found_attempts = learner_view.attempts(_db(services), who, shown)
    return render(
        request,
        services,
        "dashboard/learner.html",
        page=found,
        learner=who,
        shown={e.id: e for e in shown},
        attempts=found_attempts,
    )


@router.get("/cohorts/{cohort_id}/gradebook.csv")
def gradebook(cohort_id: int, request: Request, services: ServicesDep, user: UserDep) -> Response:
    try:
        found = _watched(services, user, cohort_id)
    except NotFound:
        return _missing(request, services, cohort_id)
    # An export reads a state of its own, in full.
    state = Dashboards(limit=1).state(_db(services), found, services.catalog)
    shown = view.exercises(services.book, found.exercises)
    grades = learner_view.grades(_db(services), found)
    with state.lock:
        text = learner_view.gradebook_csv(found, state, shown, grades)
    return Response(
        text,
        media_type="text/csv; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="cohort-{cohort_id}-gradebook.csv"',
            "Cache-Control": "no-store",
        },
    )
