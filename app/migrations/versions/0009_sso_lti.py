"""Single sign-on: OpenID Connect providers, LTI 1.3 platforms, the tool's key pair, outside
identities linked to accounts, and the LMS grade columns of (user, exercise).

Revision ID: 0009_sso_lti
Revises: 0008_exercise_kinds
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_sso_lti"
down_revision = "0008_exercise_kinds"
branch_labels = None
depends_on = None


def _created() -> sa.Column:
    return sa.Column("created_at", sa.DateTime(), nullable=False)


def upgrade() -> None:
    op.create_table(
        "oidc_providers",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(40), nullable=False, unique=True),
        sa.Column("issuer", sa.String(500), nullable=False),
        sa.Column("client_id", sa.String(255), nullable=False),
        sa.Column("client_secret", sa.String(500), nullable=False),
        sa.Column("scope", sa.String(200), nullable=False),
        _created(),
    )
    op.create_table(
        "sso_identities",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("source", sa.String(520), nullable=False),
        sa.Column("subject", sa.String(255), nullable=False),
        sa.Column(
            "user_id", sa.Integer(), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False
        ),
        _created(),
        sa.UniqueConstraint("source", "subject", name="uq_sso_identity"),
    )
    op.create_index("ix_sso_identities_user_id", "sso_identities", ["user_id"])
    op.create_table(
        "lti_platforms",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("issuer", sa.String(500), nullable=False),
        sa.Column("client_id", sa.String(255), nullable=False),
        sa.Column("auth_login_url", sa.String(500), nullable=False),
        sa.Column("auth_token_url", sa.String(500), nullable=False),
        sa.Column("key_set_url", sa.String(500), nullable=False),
        sa.Column("deployment_ids", sa.JSON(), nullable=False),
        _created(),
        sa.UniqueConstraint("issuer", "client_id", name="uq_lti_platform"),
    )
    op.create_table(
        "lti_tool_keys",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("kid", sa.String(64), nullable=False, unique=True),
        sa.Column("private_pem", sa.Text(), nullable=False),
        sa.Column("public_jwk", sa.JSON(), nullable=False),
        _created(),
    )
    op.create_table(
        "lti_grade_links",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "user_id", sa.Integer(), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("exercise", sa.String(200), nullable=False),
        sa.Column(
            "platform_id",
            sa.Integer(),
            sa.ForeignKey("lti_platforms.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("lti_user", sa.String(255), nullable=False),
        sa.Column("lineitem", sa.String(1000), nullable=False),
        sa.Column("ags", sa.JSON(), nullable=False),
        sa.Column("last_posted", sa.Float(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("user_id", "exercise", name="uq_lti_grade_link"),
    )


def downgrade() -> None:
    op.drop_table("lti_grade_links")
    op.drop_table("lti_tool_keys")
    op.drop_table("lti_platforms")
    op.drop_index("ix_sso_identities_user_id", table_name="sso_identities")
    op.drop_table("sso_identities")
    op.drop_table("oidc_providers")
