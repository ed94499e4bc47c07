"""Settings from the environment, read through one tree, and the single place that picks the
executor."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest
from pydantic import ValidationError

from kplay.app.executors import make_executor
from kplay.config import EngineSettings, Settings, WebSettings, WorkerSettings
from kplay.resources import data_dir
from kplay.workers.limits import Limits, child_env


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No KPLAY_ variable of the surrounding shell leaks into these tests."""
    for name in list(os.environ):
        if name.upper().startswith("KPLAY_"):
            monkeypatch.delenv(name)
    return monkeypatch


def test_defaults(clean_env: pytest.MonkeyPatch) -> None:
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


def test_one_tree_and_the_old_name() -> None:
    assert Settings is WebSettings
    assert issubclass(WebSettings, WorkerSettings) and issubclass(WorkerSettings, EngineSettings)
    assert WebSettings.env_name("cache_dir") == "KPLAY_CACHE_DIR"
    assert WebSettings.layer_of("cache_dir") == "engine"
    assert WebSettings.layer_of("jobs_per_child") == "worker"
    assert WebSettings.layer_of("port") == "web"
    with pytest.raises(KeyError):
        EngineSettings.env_name("port")  # the engine has no port


def test_jobs_per_child_has_one_default(clean_env: pytest.MonkeyPatch) -> None:
    from kplay.workers.celery_app import WorkerConfig

    default = WorkerSettings.model_fields["jobs_per_child"].default
    assert Limits().jobs_per_child == WorkerConfig().jobs_per_child == default
    assert Settings().jobs_per_child == default
    assert Limits().start_timeout_s == WorkerSettings().child_start_timeout_s
    assert Limits().wall_timeout_s == WorkerSettings().job_timeout_s


def test_the_embedded_pool_follows_the_worker_settings(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("KPLAY_JOBS_PER_CHILD", "7")
    clean_env.setenv("KPLAY_CHILD_START_TIMEOUT_S", "45")
    executor = make_executor(Settings(database_url="sqlite://", job_timeout_s=9))
    limits = executor.limits  # type: ignore[attr-defined]
    assert (limits.jobs_per_child, limits.start_timeout_s, limits.wall_timeout_s) == (7, 45, 9)


def test_the_engine_reads_its_variables_through_the_settings(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from kplay.kernels import roofline
    from kplay.kernels.backends.cuda import CudaBackend
    from kplay.kernels.catalog import _extra_roots
    from kplay.kernels.check import Memo

    clean_env.setenv("KPLAY_CACHE_DIR", str(tmp_path))
    clean_env.setenv("KPLAY_EXTRA_PROBLEMS", f"{tmp_path / 'a'}:{tmp_path / 'b'}")
    clean_env.setenv("KPLAY_CUDA_ARCH", "sm_80")
    clean_env.setenv("KPLAY_ENGINE_MEMO_MB", "2")
    assert roofline.cache_dir() == tmp_path
    assert CudaBackend().cache_dir == tmp_path / "cuda"
    assert CudaBackend().arch == "sm_80"
    assert _extra_roots() == [tmp_path / "a", tmp_path / "b"]
    assert Memo.budget() == 2 * 1024 * 1024
    clean_env.setenv("KPLAY_CACHE_DIR", "")  # empty counts as unset
    assert roofline.cache_dir() == EngineSettings().cache_root() != tmp_path


def test_a_bad_value_names_its_setting(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("KPLAY_ENGINE_MEMO_MB", "-1")
    with pytest.raises(ValidationError, match="engine_memo_mb"):
        EngineSettings()
    clean_env.setenv("KPLAY_FORCE_NO_GPU", "maybe")
    with pytest.raises(ValidationError, match="force_no_gpu"):
        Settings()


def test_children_get_the_engine_settings_and_no_other(tmp_path: Path) -> None:
    parent = {name: "1" for name in WebSettings.env_names()}
    env = child_env(Limits(), tmp_path / "home", tmp_path / "cache", parent)
    passed = {name for name in env if name.startswith("KPLAY_")}
    assert passed == EngineSettings.env_names()
    assert "KPLAY_BROKER_URL" not in env and "KPLAY_DATABASE_URL" not in env
