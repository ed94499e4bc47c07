"""The exercise kinds' own rows (migration 0008): a learner's prediction before a run, and
their answers to the questions of a stored profile.

A prediction is written before its run is handed over, and its run is set once, when that run
is created: from then on the prediction can no longer change (app/services/exercisekinds.py).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Float, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from kplay.app.db.models import Base, UTCDateTime, utcnow


class Prediction(Base):
    __tablename__ = "exercise_predictions"
    __table_args__ = (Index("ix_exercise_predictions_user_cell", "user", "cell_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user: Mapped[str] = mapped_column(String(200))
    cell_id: Mapped[str] = mapped_column(String(100))
    quantity: Mapped[str] = mapped_column(String(40))
    # A number for a measured quantity; a verdict's key (done, wrong, ...) for `verdict`.
    value: Mapped[float | None] = mapped_column(Float, nullable=True)
    choice: Mapped[str | None] = mapped_column(String(40), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    run_id: Mapped[str | None] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), nullable=True, unique=True
    )


class ProfileAnswer(Base):
    __tablename__ = "exercise_profile_answers"
    __table_args__ = (Index("ix_exercise_profile_answers_user_cell", "user", "cell_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user: Mapped[str] = mapped_column(String(200))
    cell_id: Mapped[str] = mapped_column(String(100))
    question: Mapped[str] = mapped_column(String(20))
    answer: Mapped[str] = mapped_column(String(200))
    correct: Mapped[bool] = mapped_column(Boolean)
    # How many questions the cell had then: progress counts it solved when each is right.
    questions: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
