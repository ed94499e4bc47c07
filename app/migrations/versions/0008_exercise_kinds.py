"""Exercise kinds: a learner's prediction before a run (`exercise_predictions`, its run set
once, when the run is created) and their answers to a stored profile's questions
(`exercise_profile_answers`, each graded when given).

Revision ID: 0008_exercise_kinds
Revises: 0007_dashboard_index
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_exercise_kinds"
down_revision = "0007_dashboard_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "exercise_predictions",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("user", sa.String(200), nullable=False),
        sa.Column("cell_id", sa.String(100), nullable=False),
        sa.Column("quantity", sa.String(40), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("choice", sa.String(40), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column(
            "run_id",
            sa.String(32),
            sa.ForeignKey("runs.id", ondelete="CASCADE"),
            nullable=True,
            unique=True,
        ),
    )
    op.create_index(
        "ix_exercise_predictions_user_cell", "exercise_predictions", ["user", "cell_id"]
    )
    op.create_table(
        "exercise_profile_answers",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("user", sa.String(200), nullable=False),
        sa.Column("cell_id", sa.String(100), nullable=False),
        sa.Column("question", sa.String(20), nullable=False),
        sa.Column("answer", sa.String(200), nullable=False),
        sa.Column("correct", sa.Boolean(), nullable=False),
        sa.Column("questions", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index(
        "ix_exercise_profile_answers_user_cell", "exercise_profile_answers", ["user", "cell_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_exercise_profile_answers_user_cell", table_name="exercise_profile_answers")
    op.drop_table("exercise_profile_answers")
    op.drop_index("ix_exercise_predictions_user_cell", table_name="exercise_predictions")
    op.drop_table("exercise_predictions")
