"""The dashboard's per-(learner, exercise) aggregates of finished runs, filled from the runs
already stored (app/db/dashcells.py, app/services/dashboard_cells.py).

Revision ID: 0010_dashboard_cells
Revises: 0009_sso_lti
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_dashboard_cells"
down_revision = "0009_sso_lti"
branch_labels = None
depends_on = None


def _when(name: str) -> sa.Column:
    return sa.Column(name, sa.DateTime(), nullable=True)


def upgrade() -> None:
    op.create_table(
        "dashboard_cells",
        sa.Column("user", sa.String(200), primary_key=True),
        sa.Column("cell_id", sa.String(200), primary_key=True),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Integer(), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False),
        _when("first_at"),
        _when("last_at"),
        _when("changed_at"),
        _when("first_failed_at"),
        _when("first_done_at"),
        sa.Column("tier_problem", sa.String(100), nullable=True),
        sa.Column("tier_place", sa.Integer(), nullable=True),
        sa.Column("tier_name", sa.String(100), nullable=True),
        _when("tier_at"),
        sa.Column("best_us", sa.Float(), nullable=True),
        sa.Column("failures", sa.JSON(), nullable=True),
    )
    # The backfill: every pair with finished runs, as a verdict would have written it.
    from kplay.app.services.dashboard_cells import rebuild

    rebuild(op.get_bind())


def downgrade() -> None:
    op.drop_table("dashboard_cells")
