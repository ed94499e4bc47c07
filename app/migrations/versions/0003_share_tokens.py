"""A run's share token: the unguessable part of its public, read-only link (/shared/<token>).

Empty until the run's owner shares it (app.services.sharing); unique, so a link names one run.
Both SQLite and PostgreSQL let a unique index hold any number of empty (NULL) tokens.

Revision ID: 0003_share_tokens
Revises: 0002_search
Create Date: 2024-08-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_share_tokens"
down_revision = "0002_search"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("share_token", sa.String(64), nullable=True))
    op.create_index("ix_runs_share_token", "runs", ["share_token"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_runs_share_token", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("share_token")
