"""The search entries of the distributed mode (PostgreSQL full-text search).

The embedded mode searches an in-memory SQLite FTS5 table of its own and needs nothing
here; on SQLite this revision changes nothing. The rows are derived from the book and the
catalog (app.services.search writes them); `document` is kept by PostgreSQL, with headings
weighted A, a problem's slug and tags B, the chapter's title C and the text D.

Revision ID: 0002_search
Revises: 0001_runs
Create Date: 2024-07-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import TSVECTOR

revision = "0002_search"
down_revision = "0001_runs"
branch_labels = None
depends_on = None

DOCUMENT = (
    "setweight(to_tsvector('english', heading), 'A') || "
    "setweight(to_tsvector('english', keywords), 'B') || "
    "setweight(to_tsvector('english', chapter), 'C') || "
    "setweight(to_tsvector('english', body), 'D')"
)


def _postgres() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def upgrade() -> None:
    if not _postgres():
        return
    op.create_table(
        "search_entries",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("heading", sa.Text(), nullable=False),
        sa.Column("chapter", sa.Text(), nullable=False),
        sa.Column("keywords", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("part", sa.Text(), nullable=False),
        # The fingerprint of the entries these rows were written from.
        sa.Column("signature", sa.String(64), nullable=False),
        sa.Column("document", TSVECTOR(), sa.Computed(DOCUMENT, persisted=True)),
    )
    op.create_index(
        "ix_search_entries_document", "search_entries", ["document"], postgresql_using="gin"
    )


def downgrade() -> None:
    if not _postgres():
        return
    op.drop_index("ix_search_entries_document", table_name="search_entries")
    op.drop_table("search_entries")
