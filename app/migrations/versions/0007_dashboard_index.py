"""The dashboard's index: a cohort's live view asks for the runs of its learners changed
since a moment, one learner at a time in the index's order (app/services/dashboard.py).

Revision ID: 0007_dashboard_index
Revises: 0006_cohorts
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

revision = "0007_dashboard_index"
down_revision = "0006_cohorts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_runs_user_updated", "runs", ["user", "updated_at"])


def downgrade() -> None:
    op.drop_index("ix_runs_user_updated", table_name="runs")
