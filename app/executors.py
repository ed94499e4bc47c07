"""The one place that decides which executor runs jobs, and what the app may ask of it.

Every executor implements `kplay.workers.executor.Executor` (submit, queue positions,
devices, start, stop). An executor whose jobs run elsewhere has more to offer, and says so
by implementing one of the protocols below; the app checks with isinstance, never by
probing for attribute names.
"""

from __future__ import annotations

import logging
from typing import Protocol, runtime_checkable

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from kplay.app.db.models import Run
from kplay.app.db.session import Database
from kplay.config import Settings
from kplay.kernels.models import RunJob
from kplay.workers.executor import Executor
from kplay.workers.fleet_models import FleetSnapshot
from kplay.workers.waits import KEPT, Durations

log = logging.getLogger(__name__)


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
    executor = LocalExecutor(settings.pool_size, limits)
    # The wait estimates start from the runs of before the restart, not from nothing.
    seed_durations(executor.durations, settings.database_url)
    return executor


def seed_durations(durations: Durations, database_url: str, limit: int = KEPT) -> int:
    """Add how long the latest evaluated runs in the database took (started to finished),
    oldest first, to `durations`; returns how many. Nothing when the database cannot be read
    (a new one is made, and migrated, before the executor)."""
    stmt = (
        select(Run.problem, Run.backend, Run.started_at, Run.finished_at)
        .where(
            Run.started_at.is_not(None),
            Run.finished_at.is_not(None),
            Run.state != "rejected",
        )
        .order_by(Run.finished_at.desc())
        .limit(limit)
    )
    db = Database(database_url)
    try:
        with db.session() as s:
            rows = list(s.execute(stmt))
    except SQLAlchemyError as exc:
        log.debug("no earlier runs to start the wait estimates from: %s", exc)
        return 0
    finally:
        db.dispose()
    for problem, backend, started, finished in reversed(rows):
        durations.add((problem, backend), max(0.0, (finished - started).total_seconds()))
    return len(rows)
