"""Classroom: cohorts (with a join code), their members (learner or instructor), assignments
(exercises, a deadline, an optional grading device kind and a secret seed) and submissions
(a learner's run handed in for one exercise, with its grading run, lateness, state and score).

Revision ID: 0006_cohorts
Revises: 0005_accounts
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_cohorts"
down_revision = "0005_accounts"
branch_labels = None
depends_on = None


def _fk(target: str) -> sa.ForeignKey:
    return sa.ForeignKey(target, ondelete="CASCADE")


def upgrade() -> None:
    op.create_table(
        "cohorts",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(120), nullable=False),
        sa.Column("join_code", sa.String(32), nullable=False, unique=True),
        sa.Column("created_by", sa.Integer(), _fk("users.id"), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "cohort_members",
        sa.Column("cohort_id", sa.Integer(), _fk("cohorts.id"), primary_key=True),
        sa.Column("user_id", sa.Integer(), _fk("users.id"), primary_key=True),
        sa.Column("role", sa.String(20), nullable=False, server_default="learner"),
        sa.Column("joined_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_cohort_members_user_id", "cohort_members", ["user_id"])
    op.create_table(
        "assignments",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("cohort_id", sa.Integer(), _fk("cohorts.id"), nullable=False),
        sa.Column("title", sa.String(200), nullable=False),
        sa.Column("exercises", sa.JSON(), nullable=False),
        sa.Column("deadline", sa.DateTime(), nullable=False),
        sa.Column("device_kind", sa.String(64), nullable=True),
        sa.Column("hidden_seed", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_assignments_cohort_id", "assignments", ["cohort_id"])
    op.create_table(
        "submissions",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("assignment_id", sa.Integer(), _fk("assignments.id"), nullable=False),
        sa.Column("user_id", sa.Integer(), _fk("users.id"), nullable=False),
        sa.Column("exercise", sa.String(200), nullable=False),
        sa.Column("run_id", sa.String(32), _fk("runs.id"), nullable=False),
        sa.Column("graded_run_id", sa.String(32), nullable=True),
        sa.Column("submitted_at", sa.DateTime(), nullable=False),
        sa.Column("late", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("state", sa.String(32), nullable=False, server_default="pending"),
        sa.Column("score", sa.Float(), nullable=True),
    )
    op.create_index("ix_submissions_assignment_user", "submissions", ["assignment_id", "user_id"])
    op.create_index("ix_submissions_graded_run_id", "submissions", ["graded_run_id"])


def downgrade() -> None:
    op.drop_index("ix_submissions_graded_run_id", table_name="submissions")
    op.drop_index("ix_submissions_assignment_user", table_name="submissions")
    op.drop_table("submissions")
    op.drop_index("ix_assignments_cohort_id", table_name="assignments")
    op.drop_table("assignments")
    op.drop_index("ix_cohort_members_user_id", table_name="cohort_members")
    op.drop_table("cohort_members")
    op.drop_table("cohorts")
