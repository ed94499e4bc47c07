"""LTI 1.3 grade passback: the line item a launch named for (account, exercise), and the
score posted there when a submission of that exercise is graded (pylti1p3's
AssignmentsGradesService, with a client-credentials token from the platform's token URL)."""

from __future__ import annotations

import logging
import threading
import typing as t
from datetime import UTC, datetime

import requests
from pylti1p3.assignments_grades import AssignmentsGradesService
from pylti1p3.grade import Grade
from pylti1p3.service_connector import ServiceConnector
from sqlalchemy import select

from kplay.app.db.models import utcnow
from kplay.app.db.session import Database
from kplay.app.db.ssomodels import LtiGradeLink
from kplay.app.services.ltiplatforms import (
    LtiError,
    LtiPlatforms,
    PlatformInfo,
    registration,
    tool_key,
)

log = logging.getLogger(__name__)
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
HTTP_TIMEOUT_S = 15


def with_timeout(call: t.Callable[..., t.Any]) -> t.Callable[..., t.Any]:
    """`requests` waits for ever by default; an LMS that hangs must not hold a thread."""

    def timed(*args: t.Any, **kwargs: t.Any) -> t.Any:
        kwargs.setdefault("timeout", HTTP_TIMEOUT_S)
        return call(*args, **kwargs)

    return timed


def link_grades(
    db: Database, user_id: int, exercise: str, platform: PlatformInfo, body: t.Mapping[str, t.Any]
) -> bool:
    """Keep the launch's line item for (user, exercise); False when the launch has none
    that takes scores."""
    ags = body.get(AGS_CLAIM)
    if not isinstance(ags, dict) or not ags.get("lineitem"):
        return False
    if SCORE_SCOPE not in (ags.get("scope") or []):
        return False
    values = {
        "platform_id": platform.id,
        "lti_user": str(body.get("sub")),
        "lineitem": str(ags["lineitem"])[:1000],
        "ags": dict(ags),
        "updated_at": utcnow(),
    }
    with db.session() as s:
        row = s.scalar(
            select(LtiGradeLink).where(
                LtiGradeLink.user_id == user_id, LtiGradeLink.exercise == exercise
            )
        )
        if row is None:
            s.add(LtiGradeLink(user_id=user_id, exercise=exercise, **values))
        else:
            for name, value in values.items():
                setattr(row, name, value)
    return True


def post_score(db: Database, user_id: int, exercise: str, state: str, score: float | None) -> bool:
    """Post a graded submission's score to the line item linked to (user, exercise).

    The LMS gets a score out of 100: the roofline percentage for a correct, timed run; 100
    for a correct run that was not timed; 0 for a failed one. False when no line item is
    linked. Raises LtiError when the LMS refuses."""
    with db.session() as s:
        link = s.scalar(
            select(LtiGradeLink).where(
                LtiGradeLink.user_id == user_id, LtiGradeLink.exercise == exercise
            )
        )
    if link is None:
        return False
    platform = LtiPlatforms(db).get(link.platform_id)
    if platform is None:
        return False
    given = 0.0 if state != "graded" else (100.0 if score is None else min(score, 100.0))
    grade = (
        Grade()
        .set_score_given(given)
        .set_score_maximum(100)
        .set_timestamp(datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"))
        .set_activity_progress("Completed")
        .set_grading_progress("FullyGraded")
        .set_user_id(link.lti_user)
        .set_comment(f"{exercise}: {state}")
    )
    session = requests.Session()
    session.request = with_timeout(session.request)  # type: ignore[method-assign]
    connector = ServiceConnector(registration(platform, tool_key(db)), session)
    try:
        AssignmentsGradesService(connector, link.ags).put_grade(grade)  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001 - pylti1p3 raises plain and service exceptions
        raise LtiError(f"{platform.issuer} refused the score for {exercise}: {exc}") from None
    with db.session() as s:
        stored = s.get(LtiGradeLink, link.id)
        if stored is not None:
            stored.last_posted = given
    return True


def scores_settled(db: Database, settled: list[tuple[int, str, str, float | None]]) -> None:
    """Hook of app/services/grading.py: post each just-settled (user, exercise, state,
    score) whose exercise an LMS line item follows, on a thread (a page read never waits
    on an LMS)."""
    if not settled:
        return
    with db.session() as s:
        users = {u for u, *_ in settled}
        linked = set(
            s.execute(
                select(LtiGradeLink.user_id, LtiGradeLink.exercise).where(
                    LtiGradeLink.user_id.in_(users)
                )
            ).tuples()
        )
    todo = [row for row in settled if (row[0], row[1]) in linked]
    if todo:
        threading.Thread(target=_post_all, args=(db, todo), daemon=True).start()


def _post_all(db: Database, todo: list[tuple[int, str, str, float | None]]) -> None:
    for user_id, exercise, state, score in todo:
        try:
            post_score(db, user_id, exercise, state, score)
        except LtiError as exc:
            log.warning("LTI grade passback: %s", exc)
