"""A cohort as its dashboard needs it: its learners, instructors and assignments, read on
every request (one query), and who may watch it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Integer,
    String,
    bindparam,
    cast,
    literal,
    null,
    select,
    union_all,
)

from kplay.app.db.classroom import Assignment, Cohort, CohortMember
from kplay.app.db.models import User, UTCDateTime
from kplay.app.db.session import Database
from kplay.app.services.accounts import owner_key


class NotFound(LookupError):
    """No such cohort for this viewer (answered as 404, whether it exists or not)."""


@dataclass(frozen=True)
class Learner:
    user_id: int
    owner: str  # the name the learner's runs are stored under
    name: str
    email: str


@dataclass(frozen=True)
class AssignmentInfo:
    id: int
    title: str
    exercises: tuple[str, ...]
    deadline: datetime


@dataclass(frozen=True)
class Roster:
    cohort_id: int
    name: str
    learners: tuple[Learner, ...]
    instructors: frozenset[int]
    assignments: tuple[AssignmentInfo, ...]

    @property
    def exercises(self) -> tuple[str, ...]:
        """Every exercise of the cohort's assignments, once each, in the assignments' order."""
        return tuple(dict.fromkeys(e for a in self.assignments for e in a.exercises))

    @property
    def key(self) -> tuple[Any, ...]:
        return (tuple(x.owner for x in self.learners), self.exercises)

    @property
    def members(self) -> str:
        """A short mark of which learners the cohort has: a page made for other learners
        (one joined or left since) is sent its heatmap again with its next update."""
        ids = ",".join(str(x.user_id) for x in self.learners)
        return hashlib.sha256(ids.encode()).hexdigest()[:16]

    def learner(self, user_id: int) -> Learner | None:
        return next((x for x in self.learners if x.user_id == user_id), None)


def _roster_query() -> Any:
    """The cohort, its members and its assignments as the rows of one statement (one round
    trip): (kind, id, text, name, email, at, exercises), the cohort's row first (kind 0),
    then its members by name (1), then its assignments in the order they were made (2).
    Made once; the cohort is its parameter `cohort_id`."""
    cohort_id = bindparam("cohort_id", type_=Integer())
    # Typed NULLs: PostgreSQL types a UNION's column from its first branches.
    text, when, listed = cast(null(), String()), cast(null(), UTCDateTime()), cast(null(), JSON())
    cohort = select(
        literal(0).label("kind"), Cohort.id, Cohort.name.label("text"), text.label("name"),
        text.label("email"), when.label("at"), listed.label("exercises"),
        text.label("sort_name"), when.label("sort_at"),
    ).where(Cohort.id == cohort_id)  # fmt: skip
    who = (
        literal(1), CohortMember.user_id, CohortMember.role, User.display_name, User.email,
        when, listed, User.display_name, when,
    )  # fmt: skip
    members = (
        select(*who)
        .join(User, User.id == CohortMember.user_id)
        .where(CohortMember.cohort_id == cohort_id)
    )
    work = select(
        literal(2), Assignment.id, Assignment.title, text, text, Assignment.deadline,
        Assignment.exercises, text, Assignment.created_at,
    ).where(Assignment.cohort_id == cohort_id)  # fmt: skip
    both = union_all(cohort, members, work).subquery()
    c = both.c
    return select(c.kind, c.id, c.text, c.name, c.email, c.at, c.exercises).order_by(
        c.kind, c.sort_name, c.sort_at, c.id
    )


ROSTER = _roster_query()


def roster(db: Database, cohort_id: int) -> Roster:
    """The cohort's learners, instructors and assignments (one query); NotFound when there
    is none."""
    with db.session() as s:
        rows = s.execute(ROSTER, {"cohort_id": cohort_id}).all()
    if not rows or rows[0][0] != 0:
        raise NotFound(f"no cohort {cohort_id}")
    name = rows[0][2]
    learners, instructors, assignments = [], set(), []
    for kind, key, text, shown, email, deadline, exercises in rows[1:]:
        if kind == 1 and text == "learner":
            learners.append(Learner(key, owner_key(key), shown, email))
        elif kind == 1 and text == "instructor":
            instructors.add(key)
        elif kind == 2:
            found = tuple(str(e) for e in (exercises or []))
            assignments.append(AssignmentInfo(key, text, found, deadline))
    return Roster(cohort_id, name, tuple(learners), frozenset(instructors), tuple(assignments))


def may_watch(roster: Roster, viewer: Any) -> bool:
    """Instructors of this cohort and admins; no one else (not even its learners)."""
    role = getattr(viewer, "role", None)
    account = getattr(viewer, "account_id", None)
    if account is None:
        return False
    return role == "admin" or account in roster.instructors
