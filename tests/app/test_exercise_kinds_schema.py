"""Migration 0008 and the models of app/db/exercisemodels.py agree, on SQLite and PostgreSQL;
the migration goes down and up again."""

from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from kplay.app.db import exercisemodels
from kplay.app.db.migrate import alembic_config, upgrade
from kplay.app.db.models import Base
from kplay.app.db.session import Database

TABLES = {"exercise_predictions", "exercise_profile_answers"}


def _concerns(diff: object) -> bool:
    return any(name in repr(diff) for name in TABLES)


def test_migration_matches_the_models(database_url: str) -> None:
    assert exercisemodels.Prediction.__tablename__ in TABLES
    db = Database(database_url)
    try:
        upgrade(db.engine)
        with db.engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            diffs = [d for d in compare_metadata(ctx, Base.metadata) if _concerns(d)]
        assert diffs == [], f"migration 0008 and app/db/exercisemodels.py differ: {diffs}"
        insp = inspect(db.engine)
        assert TABLES <= set(insp.get_table_names())
        indexes = {i["name"] for i in insp.get_indexes("exercise_predictions")}
        assert "ix_exercise_predictions_user_cell" in indexes
    finally:
        db.dispose()


def test_the_migration_goes_down_and_up(database_url: str) -> None:
    db = Database(database_url)
    try:
        upgrade(db.engine)
        cfg = alembic_config()
        with db.engine.begin() as conn:
            cfg.attributes["connection"] = conn
            below = ScriptDirectory.from_config(cfg).get_revision("0008_exercise_kinds")
            command.downgrade(cfg, str(below.down_revision))
        assert not TABLES & set(inspect(db.engine).get_table_names())
        upgrade(db.engine)
        assert TABLES <= set(inspect(db.engine).get_table_names())
    finally:
        db.dispose()
