"""A cohort as its dashboard needs it: its learners, instructors and assignments, read on
every request (three small queries), and who may watch it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from kplay.app.db.classroom import Assignment, Cohort, CohortMember
from kplay.app.db.models import User
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


def roster(db: Database, cohort_id: int) -> Roster:
    """The cohort's learners, instructors and assignments; NotFound when there is none."""
    with db.session() as s:
        cohort = s.get(Cohort, cohort_id)
        if cohort is None:
            raise NotFound(f"no cohort {cohort_id}")
        members = s.execute(
            select(CohortMember.user_id, CohortMember.role, User.display_name, User.email)
            .join(User, User.id == CohortMember.user_id)
            .where(CohortMember.cohort_id == cohort_id)
            .order_by(User.display_name, User.id)
        ).all()
        work = s.execute(
            select(Assignment.id, Assignment.title, Assignment.exercises, Assignment.deadline)
            .where(Assignment.cohort_id == cohort_id)
            .order_by(Assignment.created_at, Assignment.id)
        ).all()
        name = cohort.name
    learners = tuple(
        Learner(uid, owner_key(uid), shown, email)
        for uid, role, shown, email in members
        if role == "learner"
    )
    instructors = frozenset(uid for uid, role, _n, _e in members if role == "instructor")
    assignments = tuple(
        AssignmentInfo(aid, title, tuple(str(e) for e in (exercises or [])), deadline)
        for aid, title, exercises, deadline in work
    )
    return Roster(cohort_id, name, learners, instructors, assignments)


def may_watch(roster: Roster, viewer: Any) -> bool:
    """Instructors of this cohort and admins; no one else (not even its learners)."""
    role = getattr(viewer, "role", None)
    account = getattr(viewer, "account_id", None)
    if account is None:
        return False
    return role == "admin" or account in roster.instructors
