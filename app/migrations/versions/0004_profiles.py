"""Profiles: a run that profiles another names it, and its Nsight Compute report is kept apart.

`runs.profile_of` is the id of the run a profile run re-ran under Nsight Compute (empty for
every other run). `profile_reports` holds each profile's `.ncu-rep`, the file Nsight
Compute's GUI opens: megabytes that the run's JSON result, read on every poll, should not
carry.

Revision ID: 0004_profiles
Revises: 0003_share_tokens
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_profiles"
down_revision = "0003_share_tokens"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("profile_of", sa.String(32), nullable=True))
    op.create_index("ix_runs_profile_of", "runs", ["profile_of"])
    op.create_table(
        "profile_reports",
        sa.Column("run_id", sa.String(32), primary_key=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("profile_reports")
    op.drop_index("ix_runs_profile_of", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("profile_of")
