"""The runs table.

Revision ID: 0001_runs
Revises:
Create Date: 2024-06-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_runs"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("user", sa.String(200), nullable=False),
        sa.Column("cell_id", sa.String(200), nullable=True),
        sa.Column("chapter", sa.String(200), nullable=True),
        sa.Column("problem", sa.String(100), nullable=False),
        sa.Column("backend", sa.String(40), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("launch", sa.JSON(), nullable=True),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
    )
    op.create_index("ix_runs_cell_user_created", "runs", ["cell_id", "user", "created_at"])
    op.create_index("ix_runs_state", "runs", ["state"])
    op.create_index("ix_runs_user_created", "runs", ["user", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_runs_user_created", table_name="runs")
    op.drop_index("ix_runs_state", table_name="runs")
    op.drop_index("ix_runs_cell_user_created", table_name="runs")
    op.drop_table("runs")
