"""Alembic environment: always online, on the connection that app.db.migrate hands over."""

from __future__ import annotations

from alembic import context

from kplay.app.db import classroom as _classroom  # noqa: F401 - its tables join the metadata
from kplay.app.db.models import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through app.db.migrate.upgrade(engine)")

# Batch mode lets later migrations alter tables on SQLite, which lacks most ALTER forms.
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
