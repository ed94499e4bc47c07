"""An assignment's hidden grading cases: per exercise, the test cases the grader checks beyond
the problem's own (app/services/gradingcases.py, kernels/hiddencases.py).

Revision ID: 0011_hidden_cases
Revises: 0010_dashboard_cells
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_hidden_cases"
down_revision = "0010_dashboard_cells"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("assignments") as batch:
        batch.add_column(sa.Column("hidden_cases", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("assignments") as batch:
        batch.drop_column("hidden_cases")
