"""The dashboard's per-(learner, exercise) aggregates of finished runs (migration 0010).

One row per pair of a runs' owner and an exercise cell, made from that pair's finished runs
(profile runs aside): how many, how many failed and how many ended done, the first and
last submission times, the first failed and first done ones, the best tier reached and when,
the best kernel time of a correct run, and the failed runs by verdict and message. A run's
final verdict and its pair's row are written in one transaction (app/services/records.py);
runs still going are not in it: the dashboard adds them when it reads
(app/services/dashboard_cells.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from kplay.app.db.models import Base, UTCDateTime


class DashboardCell(Base):
    __tablename__ = "dashboard_cells"

    user: Mapped[str] = mapped_column(String(200), primary_key=True)
    cell_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    runs: Mapped[int] = mapped_column(Integer, default=0)
    failed: Mapped[int] = mapped_column(Integer, default=0)
    done: Mapped[int] = mapped_column(Integer, default=0)
    first_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    last_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # The newest updated_at of its finished runs.
    changed_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    first_failed_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    first_done_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # The best tier: the problem of the run that first reached it, the tier's place among
    # that problem's tiers and its name; when that run was submitted.
    tier_problem: Mapped[str | None] = mapped_column(String(100), nullable=True)
    tier_place: Mapped[int | None] = mapped_column(Integer, nullable=True)
    tier_name: Mapped[str | None] = mapped_column(String(100), nullable=True)
    tier_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    best_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    # Failed runs by verdict: [[state, message or null, count, latest submission (ISO)], ...]
    failures: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)
