"""The classroom's pages: /cohorts (one's cohorts; make one; join by code), /join/<code>,
/cohorts/<id> (members, join link, assignments) and /assignments/<id> (hand in a run; the
submissions). The JSON API is app/routers/cohorts_api.py.

Thin: app.services.cohorts and app.services.assignments decide who may do what. Every form
carries the session's signed form token, as the account pages' do (app.accounts.check_form).
A page someone may not see answers as for a cohort that does not exist.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from kplay.app import accounts as web_accounts
from kplay.app.deps import RunsDep, ServicesDep
from kplay.app.localmode import local_runs_only
from kplay.app.ratelimit import limit_run_starts
from kplay.app.render import error_page, render
from kplay.app.services import assignments as asg
from kplay.app.services import cohorts as co
from kplay.app.services import gradingcases as gc
from kplay.app.services.access import Viewer

router = APIRouter(include_in_schema=False)
FormText = Annotated[str, Form()]
Id = Annotated[int, Path(ge=1, le=co.MAX_ID)]
Code = Annotated[str, Path(max_length=64)]


def _login(target: str) -> Response:
    return RedirectResponse(f"/login?next={quote(target)}", status_code=303)


def _refused(request: Request, services: ServicesDep, exc: co.CohortError) -> Response:
    return error_page(request, services, exc.status, exc.message)


def _page(
    request: Request, services: ServicesDep, name: str, status: int = 200, **values: Any
) -> Response:
    values.setdefault("error", "")
    values.setdefault("notice", "")
    return render(
        request,
        services,
        name,
        status_code=status,
        csrf=web_accounts.form_token(request),
        viewer=web_accounts.viewer(request),
        **values,
    )


# ---------------------------------------------------------------- cohorts


def _list(
    request: Request, services: ServicesDep, runs: RunsDep, status: int = 200, **values: Any
) -> Response:
    viewer = web_accounts.viewer(request)
    if viewer.account_id is None:
        return _login("/cohorts")
    return _page(
        request,
        services,
        "cohorts/list.html",
        status,
        page={"title": "Cohorts"},
        cohorts=co.Cohorts(runs.db).mine(viewer),
        may_create=co.may_create(viewer),
        **values,
    )


@router.get("/cohorts", response_class=HTMLResponse)
def cohorts_page(request: Request, services: ServicesDep, runs: RunsDep) -> Response:
    return _list(request, services, runs)


@router.post("/cohorts", response_class=HTMLResponse)
def create_cohort(
    request: Request, services: ServicesDep, runs: RunsDep, name: FormText = "", csrf: FormText = ""
) -> Response:
    web_accounts.check_form(request, csrf)
    viewer = web_accounts.viewer(request)
    if viewer.account_id is None:
        return _login("/cohorts")
    try:
        made = co.Cohorts(runs.db).create(viewer, name)
    except co.CohortError as exc:
        return _list(request, services, runs, exc.status, error=exc.message, name=name)
    return RedirectResponse(f"/cohorts/{made.id}", status_code=303)


@router.get("/cohorts/join", response_class=HTMLResponse)
def join_form() -> Response:
    """The join form lives on the cohorts page; a bookmarked or typed /cohorts/join lands there
    (not on /cohorts/{id}, which would refuse "join" as an id)."""
    return RedirectResponse("/cohorts", status_code=303)


@router.post("/cohorts/join", response_class=HTMLResponse)
def join_by_code(
    request: Request, services: ServicesDep, runs: RunsDep, code: FormText = "", csrf: FormText = ""
) -> Response:
    web_accounts.check_form(request, csrf)
    return _join(request, services, runs, code.strip().rsplit("/", 1)[-1])


@router.get("/join/{code}", response_class=HTMLResponse)
def join_page(code: Code, request: Request, services: ServicesDep, runs: RunsDep) -> Response:
    viewer = web_accounts.viewer(request)
    if viewer.account_id is None:
        return _login(f"/join/{code}")
    name = co.Cohorts(runs.db).peek(code)
    if name is None:
        message = "No cohort has this join code: it may have been replaced; ask for the new one."
        return error_page(request, services, 404, message)
    return _page(
        request,
        services,
        "cohorts/join.html",
        page={"title": f"Join {name}"},
        code=code,
        cohort_name=name,
    )


@router.post("/join/{code}", response_class=HTMLResponse)
def join_by_link(
    code: Code, request: Request, services: ServicesDep, runs: RunsDep, csrf: FormText = ""
) -> Response:
    web_accounts.check_form(request, csrf)
    return _join(request, services, runs, code)


def _join(request: Request, services: ServicesDep, runs: RunsDep, code: str) -> Response:
    viewer = web_accounts.viewer(request)
    if viewer.account_id is None:
        return _login(f"/join/{quote(code, safe='')}")
    try:
        joined = co.Cohorts(runs.db).join(viewer, code)
    except co.CohortError as exc:
        return _list(request, services, runs, exc.status, error=exc.message)
    return RedirectResponse(f"/cohorts/{joined.id}", status_code=303)


def _cohort(
    request: Request,
    services: ServicesDep,
    runs: RunsDep,
    cohort_id: int,
    status: int = 200,
    **values: Any,
) -> Response:
    viewer = web_accounts.viewer(request)
    if viewer.account_id is None:
        return _login(f"/cohorts/{cohort_id}")
    cohorts, work = co.Cohorts(runs.db), asg.Assignments(runs)
    try:
        cohort = cohorts.view(viewer, cohort_id)
        listed = work.of_cohort(viewer, cohort_id)
        members = cohorts.members(viewer, cohort_id) if cohort.teaching else []
    except co.CohortError as exc:
        return _refused(request, services, exc)
    mine = {}
    if not cohort.teaching:
        mine = {a.id: work.status(work.submissions(viewer, a.id)) for a in listed}
    return _page(
        request,
        services,
        "cohorts/cohort.html",
        status,
        page={"title": cohort.name},
        cohort=cohort,
        assignments=listed,
        members=members,
        mine=mine,
        exercises=work.exercises(),
        join_url=str(request.base_url).rstrip("/") + (cohort.join_path or ""),
        **values,
    )


@router.get("/cohorts/{cohort_id}", response_class=HTMLResponse)
def cohort_page(cohort_id: Id, request: Request, services: ServicesDep, runs: RunsDep) -> Response:
    return _cohort(request, services, runs, cohort_id)


@router.post("/cohorts/{cohort_id}/rotate", response_class=HTMLResponse)
def rotate_code(
    cohort_id: Id, request: Request, services: ServicesDep, runs: RunsDep, csrf: FormText = ""
) -> Response:
    web_accounts.check_form(request, csrf)
    viewer = web_accounts.viewer(request)
    if viewer.account_id is None:
        return _login(f"/cohorts/{cohort_id}")
    try:
        co.Cohorts(runs.db).rotate(viewer, cohort_id)
    except co.CohortError as exc:
        return _refused(request, services, exc)
    notice = "A new join code: the old code and link no longer join anyone."
    return _cohort(request, services, runs, cohort_id, notice=notice)


@router.post("/cohorts/{cohort_id}/assignments", response_class=HTMLResponse)
def create_assignment(
    cohort_id: Id,
    request: Request,
    services: ServicesDep,
    runs: RunsDep,
    title: FormText = "",
    deadline: FormText = "",
    device_kind: FormText = "",
    hidden_seed: FormText = "",
    exercises: Annotated[list[str] | None, Form()] = None,
    csrf: FormText = "",
) -> Response:
    web_accounts.check_form(request, csrf)
    viewer = web_accounts.viewer(request)
    if viewer.account_id is None:
        return _login(f"/cohorts/{cohort_id}")
    try:
        made = asg.Assignments(runs).create(
            viewer,
            cohort_id,
            title,
            exercises or [],
            deadline,
            device_kind,
            hidden_seed == "on",
        )
    except co.CohortError as exc:
        if exc.status in (403, 404):
            return _refused(request, services, exc)
        form = {"title": title, "deadline": deadline, "device_kind": device_kind}
        return _cohort(request, services, runs, cohort_id, exc.status, error=exc.message, form=form)
    return RedirectResponse(f"/assignments/{made.id}", status_code=303)


# ---------------------------------------------------------------- an assignment


def _assignment(
    request: Request,
    services: ServicesDep,
    runs: RunsDep,
    assignment_id: int,
    status: int = 200,
    **values: Any,
) -> Response:
    viewer = web_accounts.viewer(request)
    if viewer.account_id is None:
        return _login(f"/assignments/{assignment_id}")
    work = asg.Assignments(runs)
    try:
        assignment, cohort = work.get(viewer, assignment_id)
        submitted = work.submissions(viewer, assignment_id)
    except co.CohortError as exc:
        return _refused(request, services, exc)
    handed = values.pop("handed", None)
    just = next((s for s in submitted if s.id == handed), None)
    if just is not None and just.user_id == viewer.account_id:
        late = " It came after the deadline, so it is marked late." if just.late else ""
        values["notice"] = f"Handed in; it is graded again on fresh inputs.{late}"
    known = work.exercises()
    own_runs, hidden, written = {}, {}, values.pop("hidden", {})
    values.setdefault("case_params", {})
    if cohort.role == "learner":
        own_runs = {e: work.finished_runs(viewer, e) for e in assignment.exercises}
    if cohort.teaching:  # the hidden cases reach the pages of those who teach the cohort only
        read = gc.GradingCases(runs).read(viewer, assignment_id)
        hidden = {e: gc.as_toml(cases) for e, cases in read.items()}
        values["case_params"] = {e: gc.parameters(runs, e) for e in read}
        hidden.update(written)  # the text as written, when it was refused
    return _page(
        request,
        services,
        "cohorts/assignment.html",
        status,
        page={"title": assignment.title},
        assignment=assignment,
        cohort=cohort,
        submissions=submitted,
        latest=work.status(submitted),
        own_runs=own_runs,
        hidden=hidden,
        exercises=known,
        **values,
    )


@router.get("/assignments/{assignment_id}", response_class=HTMLResponse)
def assignment_page(
    assignment_id: Id,
    request: Request,
    services: ServicesDep,
    runs: RunsDep,
    handed: Annotated[int | None, Query(ge=1, le=co.MAX_ID)] = None,
) -> Response:
    return _assignment(request, services, runs, assignment_id, handed=handed)


@router.post(
    "/assignments/{assignment_id}/submit",
    response_class=HTMLResponse,
    dependencies=[Depends(local_runs_only), Depends(limit_run_starts)],
)
def submit_run(
    assignment_id: Id,
    request: Request,
    services: ServicesDep,
    runs: RunsDep,
    exercise: FormText = "",
    run_id: FormText = "",
    csrf: FormText = "",
) -> Response:
    web_accounts.check_form(request, csrf)
    viewer: Viewer = web_accounts.viewer(request)
    if viewer.account_id is None:
        return _login(f"/assignments/{assignment_id}")
    try:
        done = asg.Assignments(runs).submit(viewer, assignment_id, exercise, run_id)
    except co.CohortError as exc:
        if exc.status == 404 and exc.message.startswith("no assignment"):
            return _refused(request, services, exc)
        return _assignment(request, services, runs, assignment_id, exc.status, error=exc.message)
    # Back to the page by GET: reloading it to follow the grading never hands the run in again.
    return RedirectResponse(f"/assignments/{assignment_id}?handed={done.id}", status_code=303)


@router.post("/assignments/{assignment_id}/hidden-cases", response_class=HTMLResponse)
def set_hidden_cases(
    assignment_id: Id,
    request: Request,
    services: ServicesDep,
    runs: RunsDep,
    exercise: FormText = "",
    cases: FormText = "",
    csrf: FormText = "",
) -> Response:
    """An exercise's hidden grading cases, set by one who teaches the cohort."""
    web_accounts.check_form(request, csrf)
    viewer: Viewer = web_accounts.viewer(request)
    if viewer.account_id is None:
        return _login(f"/assignments/{assignment_id}")
    try:
        gc.GradingCases(runs).set(viewer, assignment_id, exercise, cases)
    except co.CohortError as exc:
        if exc.status in (403, 404):
            return _refused(request, services, exc)
        # The page again with the text as written, so that it can be put right.
        return _assignment(
            request, services, runs, assignment_id, exc.status, error=exc.message,
            hidden={exercise: cases},
        )  # fmt: skip
    # Back to the page by GET, as after a hand-in.
    return RedirectResponse(f"/assignments/{assignment_id}", status_code=303)
