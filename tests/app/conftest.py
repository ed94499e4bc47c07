"""Fixtures for the web layer: settings on a temporary database, the app with a fake executor,
and the same database tests on SQLite and on PostgreSQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from kplay.app.main import create_app
from kplay.config import Settings
from tests.app.fakes import FakeExecutor

TEST_SECRET_KEY = "test-only-session-key-0123456789abcdef"
POSTGRES_URL = os.environ.get(
    "KPLAY_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def services_required() -> bool:
    return os.environ.get("KPLAY_REQUIRE_SERVICES") == "1"


@pytest.fixture(autouse=True)
def private_key_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An app made without KPLAY_SECRET_KEY keeps its key here, not in the user's data folder."""
    path = tmp_path / "data" / "secret_key"
    monkeypatch.setattr("kplay.app.sessionkey.default_secret_key_path", lambda: path)
    return path


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'kplay.sqlite3'}"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A private schema on the test server, dropped afterwards; skips when there is no server."""
    try:
        engine = create_engine(POSTGRES_URL, connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            conn.execute(text("select 1"))
    except Exception as exc:  # noqa: BLE001 - any failure means "no server here"
        reason = f"PostgreSQL does not answer at {POSTGRES_URL}: {type(exc).__name__}"
        if services_required():
            pytest.fail(reason)
        pytest.skip(reason)
    schema = f"kplay_test_{uuid.uuid4().hex[:12]}"
    with engine.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield f"{POSTGRES_URL}?options=-csearch_path%3D{schema}"
    finally:
        with engine.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
def make_settings(sqlite_url: str, tmp_path: Path) -> Callable[..., Settings]:
    def make(**overrides: object) -> Settings:
        # A fixed key: the tests never make the key file in the user's data folder.
        values: dict[str, object] = {"database_url": sqlite_url, "secret_key": TEST_SECRET_KEY}
        values.update(overrides)
        return Settings(**values)  # type: ignore[arg-type]

    return make


@pytest.fixture
def executor() -> FakeExecutor:
    return FakeExecutor()


@pytest.fixture
def app(make_settings: Callable[..., Settings], executor: FakeExecutor) -> FastAPI:
    return create_app(make_settings(), executor)


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as c:
        yield c
