"""Classroom models: cohorts, their members, assignments and submissions (migration 0006).

They share the metadata of app/db/models.py. A member's role in a cohort ("learner" or
"instructor") is separate from the account's site-wide role: an account with the instructor
role may create cohorts, and is then an instructor member of each cohort it made.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
)
from sqlalchemy.orm import Mapped, mapped_column

from kplay.app.db.models import Base, UTCDateTime, utcnow

MEMBER_ROLES = ("learner", "instructor")
SUBMISSION_STATES = ("pending", "graded", "failed")


class Cohort(Base):
    __tablename__ = "cohorts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(120))
    join_code: Mapped[str] = mapped_column(String(32), unique=True)
    created_by: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class CohortMember(Base):
    __tablename__ = "cohort_members"

    cohort_id: Mapped[int] = mapped_column(
        ForeignKey("cohorts.id", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    role: Mapped[str] = mapped_column(String(20), default="learner")
    joined_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Assignment(Base):
    __tablename__ = "assignments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    cohort_id: Mapped[int] = mapped_column(ForeignKey("cohorts.id", ondelete="CASCADE"), index=True)
    title: Mapped[str] = mapped_column(String(200))
    # Exercise ids as app/services/progress.py names them (cell ids of the book's problems).
    exercises: Mapped[list[str]] = mapped_column(JSON)
    deadline: Mapped[datetime] = mapped_column(UTCDateTime())
    device_kind: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # Secret: the seed the grader draws its cases from; never shown to learners.
    hidden_seed: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # Secret: per exercise id, the grading cases checked beyond the problem's own
    # (RunJob.hidden_cases; migration 0011), as kernels.models.GradingCase dumps them.
    hidden_cases: Mapped[dict[str, list[dict[str, Any]]] | None] = mapped_column(
        JSON, nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Submission(Base):
    __tablename__ = "submissions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    exercise: Mapped[str] = mapped_column(String(200))
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    graded_run_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    submitted_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    late: Mapped[bool] = mapped_column(Boolean, default=False)
    state: Mapped[str] = mapped_column(String(32), default="pending")
    score: Mapped[float | None] = mapped_column(Float, nullable=True)

    __table_args__ = (Index("ix_submissions_assignment_user", "assignment_id", "user_id"),)
