"""The classroom's JSON API under /api/v1: cohorts (make, join, read, rotate the code),
their assignments, and submissions (hand in a run; read them).

The same rules as the pages (app.services.cohorts, app.services.assignments): a cohort or
an assignment one may not see is answered as one that does not exist (404). A learner gets
their own submissions only; an assignment's hidden seed never appears in any answer. Every
change takes a JSON body and is refused when a browser says it came from another site.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from kplay.app.deps import RunsDep, UserDep
from kplay.app.localmode import local_runs_only
from kplay.app.ratelimit import limit_run_starts
from kplay.app.schemas import ErrorOut
from kplay.app.services import assignments as asg
from kplay.app.services import cohorts as co
from kplay.app.services import gradingcases as gc
from kplay.app.services.access import Viewer
from kplay.app.services.cohorts import CohortView

api_router = APIRouter(prefix="/api/v1", tags=["classroom"])
Id = Annotated[int, Path(ge=1, le=co.MAX_ID)]
TEXT = r"^[^\x00]*$"
WHY = {
    401: "not signed in: cohorts are for accounts",
    403: "signed in, but not allowed this (e.g. a learner setting an assignment)",
    404: "no such cohort, assignment or run of yours (or one you may not see)",
    409: "the run has not finished yet",
    422: "a field is missing or wrong; the message names it",
    429: "too many runs in flight or started too quickly",
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": ErrorOut, "description": WHY[code]} for code in codes}


REFUSED = errors(401, 403, 404, 422)


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CohortIn(_In):
    name: str = Field(max_length=200, pattern=TEXT, description="the cohort's name")


class JoinIn(_In):
    code: str = Field(max_length=64, pattern=TEXT, description="the cohort's join code")


class RotateIn(_In):
    pass


class AssignmentIn(_In):
    title: str = Field(max_length=400, pattern=TEXT)
    exercises: list[Annotated[str, Field(max_length=200, pattern=TEXT)]] = Field(
        max_length=200, description="kernel cell ids of the book (as /api/v1/progress names them)"
    )
    deadline: datetime = Field(description="ISO 8601; a time without a zone is UTC")
    device_kind: str | None = Field(
        default=None, max_length=64, pattern=TEXT, description="grade on this GPU model, e.g. H100"
    )
    hidden_seed: bool = Field(
        default=False, description="grade on inputs drawn from a secret seed the server makes"
    )


class HiddenCasesIn(_In):
    cases: str = Field(
        max_length=8000,
        pattern=TEXT,
        description="TOML in problem.toml's notation: one [[tests]] table per case with its "
        "name, params and an optional seed; empty: no hidden cases for the exercise",
    )


class SubmissionIn(_In):
    exercise: str = Field(max_length=200, pattern=TEXT)
    run: str = Field(max_length=64, pattern=TEXT, description="the id of one of your finished runs")


def _viewer(user: str) -> Viewer:
    return user if isinstance(user, Viewer) else Viewer(user)


def _same_site(request: Request) -> None:
    if request.headers.get("sec-fetch-site") == "cross-site":
        raise HTTPException(403, "the classroom is changed from this site's pages, not another's")


def _fail(exc: co.CohortError) -> HTTPException:
    return HTTPException(exc.status, exc.message)


def _cohort(c: CohortView) -> dict[str, Any]:
    out: dict[str, Any] = {"id": c.id, "name": c.name, "role": c.role}
    if c.teaching:
        out["join_code"], out["join_path"] = c.join_code, c.join_path
    return out


@api_router.get("/cohorts", summary="Your cohorts (every cohort, for an admin)")
def my_cohorts(runs: RunsDep, user: UserDep) -> list[dict[str, Any]]:
    return [_cohort(c) for c in co.Cohorts(runs.db).mine(_viewer(user))]


@api_router.post(
    "/cohorts",
    status_code=201,
    summary="Make a cohort (instructors and admins)",
    description="Answers with its join code and link (/join/<code>).",
    responses=REFUSED,
)
def make_cohort(body: CohortIn, request: Request, runs: RunsDep, user: UserDep) -> dict[str, Any]:
    _same_site(request)
    try:
        return _cohort(co.Cohorts(runs.db).create(_viewer(user), body.name))
    except co.CohortError as exc:
        raise _fail(exc) from None


@api_router.post("/cohorts/join", summary="Join a cohort by its code", responses=REFUSED)
def join_cohort(body: JoinIn, request: Request, runs: RunsDep, user: UserDep) -> dict[str, Any]:
    _same_site(request)
    try:
        return _cohort(co.Cohorts(runs.db).join(_viewer(user), body.code))
    except co.CohortError as exc:
        raise _fail(exc) from None


@api_router.get(
    "/cohorts/{cohort_id}",
    summary="A cohort: its assignments, and for its instructors its members and join code",
    responses=REFUSED,
)
def read_cohort(cohort_id: Id, runs: RunsDep, user: UserDep) -> dict[str, Any]:
    viewer, cohorts = _viewer(user), co.Cohorts(runs.db)
    try:
        cohort = cohorts.view(viewer, cohort_id)
        listed = asg.Assignments(runs).of_cohort(viewer, cohort_id)
        members = cohorts.members(viewer, cohort_id) if cohort.teaching else None
    except co.CohortError as exc:
        raise _fail(exc) from None
    out = _cohort(cohort)
    out["assignments"] = [a.public() for a in listed]
    if members is not None:
        out["members"] = [
            {"user": m.user_id, "name": m.display_name, "email": m.email, "role": m.role}
            for m in members
        ]
    return out


@api_router.post(
    "/cohorts/{cohort_id}/rotate",
    summary="A new join code for the cohort; the old code and link join no one",
    responses=REFUSED,
)
def rotate_code(
    cohort_id: Id, body: RotateIn, request: Request, runs: RunsDep, user: UserDep
) -> dict[str, Any]:
    _same_site(request)
    try:
        return _cohort(co.Cohorts(runs.db).rotate(_viewer(user), cohort_id))
    except co.CohortError as exc:
        raise _fail(exc) from None


@api_router.get(
    "/cohorts/{cohort_id}/assignments", summary="A cohort's assignments", responses=REFUSED
)
def cohort_assignments(cohort_id: Id, runs: RunsDep, user: UserDep) -> list[dict[str, Any]]:
    try:
        return [a.public() for a in asg.Assignments(runs).of_cohort(_viewer(user), cohort_id)]
    except co.CohortError as exc:
        raise _fail(exc) from None


@api_router.post(
    "/cohorts/{cohort_id}/assignments",
    status_code=201,
    summary="Set an assignment (the cohort's instructors)",
    responses=REFUSED,
)
def make_assignment(
    cohort_id: Id, body: AssignmentIn, request: Request, runs: RunsDep, user: UserDep
) -> dict[str, Any]:
    _same_site(request)
    try:
        made = asg.Assignments(runs).create(
            _viewer(user),
            cohort_id,
            body.title,
            body.exercises,
            body.deadline,
            body.device_kind,
            body.hidden_seed,
        )
    except co.CohortError as exc:
        raise _fail(exc) from None
    return made.public()


def _submissions(runs: RunsDep, viewer: Viewer, assignment_id: int) -> list[dict[str, Any]]:
    return [s.public() for s in asg.Assignments(runs).submissions(viewer, assignment_id)]


@api_router.get(
    "/assignments/{assignment_id}",
    summary="An assignment and its submissions (yours; every learner's for its instructors)",
    responses=REFUSED,
)
def read_assignment(assignment_id: Id, runs: RunsDep, user: UserDep) -> dict[str, Any]:
    viewer = _viewer(user)
    try:
        assignment, cohort = asg.Assignments(runs).get(viewer, assignment_id)
        out = assignment.public()
        out["role"] = cohort.role
        out["submissions"] = _submissions(runs, viewer, assignment_id)
    except co.CohortError as exc:
        raise _fail(exc) from None
    return out


@api_router.get(
    "/assignments/{assignment_id}/submissions",
    summary="An assignment's submissions, newest first (yours; all for its instructors)",
    responses=REFUSED,
)
def list_submissions(assignment_id: Id, runs: RunsDep, user: UserDep) -> list[dict[str, Any]]:
    try:
        return _submissions(runs, _viewer(user), assignment_id)
    except co.CohortError as exc:
        raise _fail(exc) from None


@api_router.post(
    "/assignments/{assignment_id}/submissions",
    status_code=201,
    summary="Hand in one of your finished runs of an exercise; it is graded again",
    description="The run's source runs again through the usual queue, on the assignment's "
    "device kind where it names one and on its secret seed where it has one. The submission "
    "is `pending` until that run ends: then `graded` (correct; `score` is its share of the "
    "roofline in %, where it was timed) or `failed`. After the deadline it is kept, `late`.",
    responses={**REFUSED, **errors(409, 429)},
    dependencies=[Depends(local_runs_only), Depends(limit_run_starts)],
)
def hand_in(
    assignment_id: Id, body: SubmissionIn, request: Request, runs: RunsDep, user: UserDep
) -> dict[str, Any]:
    _same_site(request)
    try:
        made = asg.Assignments(runs).submit(_viewer(user), assignment_id, body.exercise, body.run)
    except co.CohortError as exc:
        raise _fail(exc) from None
    return made.public()


@api_router.get(
    "/assignments/{assignment_id}/hidden-cases",
    summary="An assignment's hidden grading cases, per exercise (its instructors only)",
    responses=REFUSED,
)
def read_hidden_cases(
    assignment_id: Id, runs: RunsDep, user: UserDep
) -> dict[str, list[dict[str, Any]]]:
    try:
        return gc.public(gc.GradingCases(runs).read(_viewer(user), assignment_id))
    except co.CohortError as exc:
        raise _fail(exc) from None


@api_router.put(
    "/assignments/{assignment_id}/hidden-cases/{exercise}",
    summary="Set one exercise's hidden grading cases (its instructors only)",
    description="The cases are checked against the exercise's problem (its parameters, their "
    "kinds, the bytes of a case's arrays, its input generator) and replace the exercise's "
    "hidden cases; a grading run checks them after the problem's own, and no learner sees "
    "them: a grading run's result says of each only right or wrong.",
    responses=REFUSED,
)
def set_hidden_cases(
    assignment_id: Id,
    exercise: Annotated[str, Path(max_length=200)],
    body: HiddenCasesIn,
    request: Request,
    runs: RunsDep,
    user: UserDep,
) -> dict[str, Any]:
    _same_site(request)
    try:
        cases = gc.GradingCases(runs).set(_viewer(user), assignment_id, exercise, body.cases)
    except co.CohortError as exc:
        raise _fail(exc) from None
    return {"exercise": exercise, "cases": [c.model_dump(mode="json") for c in cases]}
