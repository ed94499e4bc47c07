"""The one place that decides which executor runs jobs."""

from __future__ import annotations

from kplay.config import Settings
from kplay.workers.executor import Executor


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
        )
    from kplay.workers.limits import Limits
    from kplay.workers.local import LocalExecutor

    limits = Limits.from_settings(settings)
    # Positional: the pool size is the first parameter whatever its name.
    return LocalExecutor(settings.pool_size, limits)
