"""The one place that decides which executor runs jobs, and what the app may ask of it.

Every executor implements `kplay.workers.executor.Executor` (submit, queue positions,
devices, start, stop). An executor whose jobs run elsewhere has more to offer, and says so
by implementing one of the protocols below; the app checks with isinstance, never by
probing for attribute names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from kplay.config import Settings
from kplay.kernels.models import RunJob
from kplay.workers.executor import Executor
from kplay.workers.fleet_models import FleetSnapshot


@runtime_checkable
class FleetAware(Protocol):
    """An executor that reads a fleet registry: workers, queues and waits."""

    def fleet_snapshot(self) -> FleetSnapshot:
        """The whole fleet now; raises when the registry cannot be reached."""
        ...


@runtime_checkable
class Reconciling(Protocol):
    """An executor whose jobs outlive the web process, and that can say which vanished."""

    def submit(self, job: RunJob) -> None:
        """Hand a job (again) to the queue; raises SubmitRefused."""
        ...

    def reconcile(self, known_unfinished_job_ids: list[str]) -> list[str]:
        """The ids, among those given, of jobs that exist nowhere any more."""
        ...


def make_executor(settings: Settings) -> Executor:
    """LocalExecutor by default; CeleryExecutor when a broker URL is configured.

    Both are imported lazily: the embedded mode must not need Celery installed, and the
    distributed mode must not start a local process pool.
    """
    if settings.broker_url:
        from kplay.workers.celery_executor import CeleryExecutor

        return CeleryExecutor(
            broker_url=settings.broker_url,
            job_timeout_s=settings.job_timeout_s,
            key_prefix=settings.key_prefix,
            user_run_cap=settings.user_run_cap,
            result_key=settings.result_key,
        )
    from kplay.workers.limits import Limits
    from kplay.workers.local import LocalExecutor

    limits = Limits.from_settings(settings)
    # Positional: the pool size is the first parameter whatever its name.
    kept = [durations_file(settings.database_url), machine_durations_file(settings)]
    return LocalExecutor(
        settings.pool_size, limits, durations_file=[p for p in kept if p is not None]
    )


def durations_file(database_url: str) -> Path | None:
    """Where the embedded executor keeps its run durations across restarts (the prior of
    the wait estimates): beside a SQLite database file, as SQLite keeps its own journals;
    None for an in-memory database or another engine's."""
    try:
        url = make_url(database_url)
    except ArgumentError:
        return None
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    if url.database.startswith("file:"):
        return None  # a URI filename: its options may name a memory database
    path = Path(url.database)
    return path.with_name(f"{path.name}-waits.json")


def machine_durations_file(settings: Settings) -> Path:
    """The same durations kept for the machine, in the cache folder: the prior of a server
    started on a fresh data folder (a new database, a copied one, PostgreSQL), so that the
    first class on a new database is not queued with nothing to go by. The file beside the
    database, where there is one, answers first: it holds that deployment's own jobs."""
    return settings.cache_root() / "waits" / f"embedded-{settings.pool_size}.json"
