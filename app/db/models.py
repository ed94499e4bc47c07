"""Typed SQLAlchemy models. A Run row is written before its job is handed to an executor."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    TypeDecorator,
    func,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes on every database (SQLite keeps no zone, so store naive UTC)."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given; use datetime.now(UTC)")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    pass


class Run(Base):
    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)  # the RunJob's job_id
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    user: Mapped[str] = mapped_column(String(200))
    cell_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    chapter: Mapped[str | None] = mapped_column(String(200), nullable=True)
    problem: Mapped[str] = mapped_column(String(100))
    backend: Mapped[str] = mapped_column(String(40))
    source: Mapped[str] = mapped_column(Text)
    launch: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    state: Mapped[str] = mapped_column(String(32), default="queued")
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # Set when the owner shares the run: its read-only link is /shared/<share_token>.
    share_token: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # Set on a profile run: the run it re-ran under Nsight Compute (workers/profiling.py).
    profile_of: Mapped[str | None] = mapped_column(String(32), nullable=True)

    __table_args__ = (
        Index("ix_runs_cell_user_created", "cell_id", "user", "created_at"),
        Index("ix_runs_state", "state"),
        Index("ix_runs_user_created", "user", "created_at"),
        Index("ix_runs_share_token", "share_token", unique=True),
        Index("ix_runs_profile_of", "profile_of"),
    )


class ProfileReport(Base):
    """A profile run's `.ncu-rep`, kept out of the run's JSON result."""

    __tablename__ = "profile_reports"

    run_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class User(Base):
    """An account (app/services/accounts.py). Its runs are stored under `acct:<id>`."""

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # As typed; unique whatever its case (the index on lower(email)).
    email: Mapped[str] = mapped_column(String(254))
    password_hash: Mapped[str] = mapped_column(String(200))
    display_name: Mapped[str] = mapped_column(String(80))
    role: Mapped[str] = mapped_column(String(20), default="learner")
    hide_name: Mapped[bool] = mapped_column(Boolean, default=False)

    __table_args__ = (Index("ix_users_email_lower", func.lower(email), unique=True),)


class ApiToken(Base):
    """An API token of an account: only the SHA-256 of the token is kept."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(80))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
