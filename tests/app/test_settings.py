"""Settings from the environment, and the single place that picks the executor."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from kplay.app.executors import make_executor
from kplay.config import Settings
from kplay.resources import data_dir


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KPLAY_DATABASE_URL", "KPLAY_BROKER_URL", "KPLAY_PORT"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings()
    assert settings.host == "127.0.0.1" and settings.port == 8000
    assert settings.broker_url is None and settings.book_dir == data_dir("book")
    assert settings.max_source_bytes == 65536 and settings.pool_size == 2
    assert settings.database_url.startswith("sqlite:///")
    assert settings.database_url.endswith("kernel-playground/kplay.sqlite3")


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KPLAY_PORT", "9123")
    monkeypatch.setenv("KPLAY_BOOK_DIR", str(tmp_path))
    monkeypatch.setenv("KPLAY_MAX_SOURCE_BYTES", "100")
    settings = Settings()
    assert settings.port == 9123 and settings.book_dir == tmp_path
    assert settings.max_source_bytes == 100


def test_sqlite_folder_is_created_on_demand(tmp_path: Path) -> None:
    from kplay.app.db.session import Database

    target = tmp_path / "deep" / "er" / "kplay.sqlite3"
    db = Database(f"sqlite:///{target}")
    with db.engine.connect():
        pass
    assert target.parent.is_dir()
    db.dispose()


def test_no_broker_means_the_local_executor(tmp_path: Path) -> None:
    from kplay.workers.local import LocalExecutor

    executor = make_executor(Settings(database_url="sqlite://", pool_size=3, job_timeout_s=7))
    assert isinstance(executor, LocalExecutor)  # built, not started: no child processes yet


def test_a_broker_means_the_celery_executor(monkeypatch: pytest.MonkeyPatch) -> None:
    made: dict[str, object] = {}

    class FakeCelery:
        def __init__(self, **kwargs: object) -> None:
            made.update(kwargs)

    module = types.ModuleType("kplay.workers.celery_executor")
    module.CeleryExecutor = FakeCelery  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "kplay.workers.celery_executor", module)
    executor = make_executor(Settings(database_url="sqlite://", broker_url="redis://x:6379/0"))
    assert isinstance(executor, FakeCelery) and made["broker_url"] == "redis://x:6379/0"
