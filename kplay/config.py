"""One settings object for the web app; every field can be set as KPLAY_<NAME>."""

from __future__ import annotations

from pathlib import Path

from platformdirs import user_data_dir
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from kplay.resources import data_dir



def default_database_url() -> str:
    # The folder is created when the engine is made, not here: reading settings has no effects.
    path = Path(user_data_dir("kernel-playground")) / "kplay.sqlite3"
    return f"sqlite:///{path}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KPLAY_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = 8000
    database_url: str = Field(default_factory=default_database_url)
    # None runs jobs in-process (LocalExecutor); a Redis URL sends them to Celery workers.
    broker_url: str | None = None
    # Distributed mode: every Redis key of this deployment starts with this prefix, and
    # one user may have at most this many runs queued or running at once (0: no cap).
    key_prefix: str = "kplay"
    user_run_cap: int = 5
    book_dir: Path = Field(default_factory=lambda: data_dir("book"))
    # Measured figures the chapters quote (JSON files written by the benchmarks).
    results_dir: Path = Field(default_factory=lambda: data_dir("results"))
    max_source_bytes: int = 65536
    pool_size: int = 2
    job_timeout_s: float = 30.0
    anonymous_user: str = "anonymous"
    # A non-final run that the executor no longer knows and that has had no news for this
    # long is declared lost, so that no card waits forever.
    stale_after_s: float = 600.0
    # Distributed mode: how often unfinished runs are checked against the queue, and how
    # long a run must have been quiet before it can be judged lost.
    reconcile_interval_s: float = 30.0
    reconcile_quiet_s: float = 15.0
    history_limit: int = 20
    log_level: str = "info"
