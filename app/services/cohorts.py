"""Cohorts: a group an instructor makes, that learners join with its code or link.

An account whose role is instructor (or admin) may make a cohort; it is then the cohort's
instructor member. A signed-in account joins with the cohort's join code (random, 128 bits,
url-safe; the link is /join/<code>) as a learner; the instructor may rotate the code, after
which the old code and link join no one.

Who sees what: a member sees the cohort; its instructors (and admins) see its members and
its join code; anyone else is told there is no such cohort, as for an id that does not exist.
`Teaching` answers the run-visibility rule of app/services/access.py: an instructor reads the
runs of the learners of the cohorts they teach.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import aliased

from kplay.app.db.classroom import Assignment, Cohort, CohortMember
from kplay.app.db.models import User
from kplay.app.db.session import Database
from kplay.app.services.access import Viewer
from kplay.app.services.accounts import owner_key

MAX_COHORT_NAME = 120
# 16 random bytes: 22 url-safe characters, far below the column's 32.
CODE_BYTES = 16
CODE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
# The largest id a cohort, an assignment or a submission can have (a 32-bit integer column).
MAX_ID = 2**31 - 1
ACCOUNT_PREFIX = "acct:"


class CohortError(ValueError):
    """A request refused; `status` is the HTTP status that fits it, `message` says why."""

    def __init__(self, status: int, message: str, field: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field


def no_cohort(cohort_id: object) -> CohortError:
    return CohortError(404, f"no cohort {cohort_id}: it does not exist or you are not in it")


def signed_in_only(viewer: Viewer, what: str) -> int:
    if viewer.account_id is None:
        raise CohortError(401, f"sign in (or sign up) to {what}")
    return viewer.account_id


def may_create(viewer: Viewer) -> bool:
    return viewer.signed_in and viewer.role in ("instructor", "admin")


def new_code() -> str:
    return secrets.token_urlsafe(CODE_BYTES)


def check_cohort_name(name: str) -> str:
    name = " ".join(name.split())
    if not name:
        raise CohortError(422, "give the cohort a name", "name")
    if len(name) > MAX_COHORT_NAME or any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise CohortError(
            422, f"a cohort's name is at most {MAX_COHORT_NAME} printable characters", "name"
        )
    return name


def plausible_code(code: str) -> bool:
    return 0 < len(code) <= 32 and set(code) <= CODE_CHARS


@dataclass(frozen=True)
class MemberInfo:
    user_id: int
    display_name: str
    email: str
    role: str
    joined_at: datetime


@dataclass(frozen=True)
class CohortView:
    """A cohort as one viewer sees it: `teaching` when they may manage it."""

    id: int
    name: str
    created_at: datetime
    role: str  # the viewer's: "learner", "instructor", or "admin" for a non-member admin
    join_code: str | None  # for those who teach it only

    @property
    def teaching(self) -> bool:
        return self.role in ("instructor", "admin")

    @property
    def join_path(self) -> str | None:
        return f"/join/{self.join_code}" if self.join_code else None


class Cohorts:
    """Every cohort operation, on the app's database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def create(self, viewer: Viewer, name: str) -> CohortView:
        user_id = signed_in_only(viewer, "make a cohort")
        if not may_create(viewer):
            raise CohortError(403, "only an instructor or an admin can make a cohort")
        cohort = Cohort(name=check_cohort_name(name), join_code=new_code(), created_by=user_id)
        with self.db.session() as s:
            s.add(cohort)
            s.flush()
            s.add(CohortMember(cohort_id=cohort.id, user_id=user_id, role="instructor"))
        return self._view(cohort, "instructor")

    def view(self, viewer: Viewer, cohort_id: int) -> CohortView:
        """The cohort, for a member or an admin; CohortError 404 for anyone else."""
        if not 0 < cohort_id <= MAX_ID:
            raise no_cohort(cohort_id)
        with self.db.session() as s:
            cohort = s.get(Cohort, cohort_id)
            role = self._role(s, cohort_id, viewer.account_id)
        if cohort is None:
            raise no_cohort(cohort_id)
        if role is None and viewer.role == "admin" and viewer.signed_in:
            role = "admin"
        if role is None:
            raise no_cohort(cohort_id)
        return self._view(cohort, role)

    def assignment(self, viewer: Viewer, assignment_id: int) -> tuple[Assignment, CohortView]:
        """An assignment's row and its cohort, for a member of it; 404 for anyone else."""
        missing = CohortError(
            404, f"no assignment {assignment_id}: it does not exist or you are not in its cohort"
        )
        if not 0 < assignment_id <= MAX_ID:
            raise missing
        with self.db.session() as s:
            row = s.get(Assignment, assignment_id)
        if row is None:
            raise missing
        try:
            return row, self.view(viewer, row.cohort_id)
        except CohortError:
            raise missing from None

    def teach(self, viewer: Viewer, cohort_id: int) -> CohortView:
        """The cohort, for one who may manage it; 404 for non-members, 403 for its learners."""
        found = self.view(viewer, cohort_id)
        if not found.teaching:
            raise CohortError(403, "only the cohort's instructors can do this")
        return found

    def mine(self, viewer: Viewer) -> list[CohortView]:
        """The viewer's cohorts (every cohort, for an admin), newest first."""
        if viewer.account_id is None:
            return []
        stmt = (
            select(Cohort, CohortMember.role)
            .outerjoin(
                CohortMember,
                and_(
                    CohortMember.cohort_id == Cohort.id,
                    CohortMember.user_id == viewer.account_id,
                ),
            )
            .order_by(Cohort.created_at.desc(), Cohort.id.desc())
        )
        if viewer.role != "admin":
            stmt = stmt.where(CohortMember.user_id.is_not(None))
        with self.db.session() as s:
            rows = s.execute(stmt).all()
        return [self._view(cohort, role or "admin") for cohort, role in rows]

    def join(self, viewer: Viewer, code: str) -> CohortView:
        """Join the cohort of `code` as a learner (a member already stays as they are)."""
        user_id = signed_in_only(viewer, "join a cohort")
        code = code.strip()
        if not plausible_code(code):
            raise CohortError(404, "no cohort has this join code: check it, or ask for a new one")
        with self.db.session() as s:
            cohort = s.scalar(select(Cohort).where(Cohort.join_code == code))
            if cohort is None:
                raise CohortError(404, "no cohort has this join code: ask for the current one")
            role = self._role(s, cohort.id, user_id)
        if role is None:
            try:
                with self.db.session() as s:
                    s.add(CohortMember(cohort_id=cohort.id, user_id=user_id, role="learner"))
            except IntegrityError:  # joined twice at once: the first one counts
                pass
            role = "learner"
        return self._view(cohort, role)

    def peek(self, code: str) -> str | None:
        """The name of the cohort `code` joins, for the join page; None for no such code."""
        if not plausible_code(code):
            return None
        with self.db.session() as s:
            return s.scalar(select(Cohort.name).where(Cohort.join_code == code))

    def rotate(self, viewer: Viewer, cohort_id: int) -> CohortView:
        self.teach(viewer, cohort_id)
        with self.db.session() as s:
            cohort = s.get(Cohort, cohort_id)
            assert cohort is not None
            cohort.join_code = new_code()
        return self.view(viewer, cohort_id)

    def members(self, viewer: Viewer, cohort_id: int) -> list[MemberInfo]:
        self.teach(viewer, cohort_id)
        stmt = (
            select(CohortMember, User)
            .join(User, User.id == CohortMember.user_id)
            .where(CohortMember.cohort_id == cohort_id)
            .order_by(CohortMember.role.desc(), User.display_name, User.id)
        )
        with self.db.session() as s:
            rows = s.execute(stmt).all()
        return [MemberInfo(u.id, u.display_name, u.email, m.role, m.joined_at) for m, u in rows]

    def member_owners(self, cohort_id: int) -> list[str]:
        """The owner names (`acct:<id>`) of every member of the cohort."""
        stmt = select(CohortMember.user_id).where(CohortMember.cohort_id == cohort_id)
        with self.db.session() as s:
            return [owner_key(uid) for uid in s.scalars(stmt)]

    @staticmethod
    def _role(s: object, cohort_id: int, user_id: int | None) -> str | None:
        if user_id is None:
            return None
        member = s.get(CohortMember, (cohort_id, user_id))  # type: ignore[attr-defined]
        return member.role if member is not None else None

    @staticmethod
    def _view(cohort: Cohort, role: str) -> CohortView:
        teaching = role in ("instructor", "admin")
        return CohortView(
            cohort.id,
            cohort.name,
            cohort.created_at,
            role,
            cohort.join_code if teaching else None,
        )


class Teaching:
    """Whether one instructor teaches a run's owner: one query on the members' primary key
    and their index on user_id per owner asked about, remembered for the viewer's request."""

    def __init__(self, db: Database, instructor_id: int) -> None:
        self.db = db
        self.instructor_id = instructor_id
        self._known: dict[str, bool] = {}

    def __call__(self, owner: str) -> bool:
        if owner not in self._known:
            self._known[owner] = self._ask(owner)
        return self._known[owner]

    def _ask(self, owner: str) -> bool:
        learner_id = _account_of(owner)
        if learner_id is None:
            return False
        teacher, learner = aliased(CohortMember), aliased(CohortMember)
        stmt = (
            select(teacher.cohort_id)
            .join(learner, learner.cohort_id == teacher.cohort_id)
            .where(
                teacher.user_id == self.instructor_id,
                teacher.role == "instructor",
                learner.user_id == learner_id,
                learner.role == "learner",
            )
            .limit(1)
        )
        with self.db.session() as s:
            return s.scalar(stmt) is not None


def _account_of(owner: str) -> int | None:
    if not owner.startswith(ACCOUNT_PREFIX):
        return None
    digits = owner[len(ACCOUNT_PREFIX) :]
    if not digits.isdigit() or len(digits) > 10 or not 0 < int(digits) <= MAX_ID:
        return None
    return int(digits)
