"""The classroom tables: migration 0006 and the models of app/db/classroom.py agree."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from kplay.app.db.classroom import Assignment, Cohort, CohortMember, Submission
from kplay.app.db.migrate import upgrade
from kplay.app.db.models import Base
from kplay.app.db.session import Database

CLASSROOM = {"cohorts", "cohort_members", "assignments", "submissions"}


def _differences(url: str) -> list[object]:
    db = Database(url)
    try:
        upgrade(db.engine)
        with db.engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            return list(compare_metadata(ctx, Base.metadata))
    finally:
        db.dispose()


def _table_of(diff: object) -> str:
    """The table a difference concerns, whatever its shape in alembic's report."""
    item = diff[0] if isinstance(diff, list) else diff
    for part in item if isinstance(item, tuple) else (item,):
        name = getattr(part, "name", None)
        table = getattr(part, "table", None)
        if table is not None and getattr(table, "name", None):
            return str(table.name)
        if isinstance(part, str) and part in CLASSROOM:
            return part
        if name in CLASSROOM:
            return str(name)
    return repr(item)


def test_migration_matches_the_models(database_url: str) -> None:
    diffs = [d for d in _differences(database_url) if _table_of(d) in CLASSROOM]
    assert diffs == [], f"migration 0006 and app/db/classroom.py differ: {diffs}"


def test_the_tables_have_the_agreed_columns_and_indexes(database_url: str) -> None:
    db = Database(database_url)
    try:
        upgrade(db.engine)
        insp = inspect(db.engine)
        for model in (Cohort, CohortMember, Assignment, Submission):
            stored = {c["name"] for c in insp.get_columns(model.__tablename__)}
            assert stored == set(model.__table__.columns.keys()), model.__tablename__
        assert insp.get_pk_constraint("cohort_members")["constrained_columns"] == [
            "cohort_id",
            "user_id",
        ]
        member_ix = {tuple(i["column_names"]) for i in insp.get_indexes("cohort_members")}
        assert ("user_id",) in member_ix
        sub_ix = {tuple(i["column_names"]) for i in insp.get_indexes("submissions")}
        assert ("assignment_id", "user_id") in sub_ix
        uniques = {tuple(u["column_names"]) for u in insp.get_unique_constraints("cohorts")}
        unique_ix = {
            tuple(i["column_names"]) for i in insp.get_indexes("cohorts") if i.get("unique")
        }
        assert ("join_code",) in uniques | unique_ix
    finally:
        db.dispose()
