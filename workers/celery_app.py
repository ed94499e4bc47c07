"""The Celery side of the distributed mode: its settings and the app factory.

Celery carries only the job (JSON, one message per run) to a worker that consumes the
right capability queue. Progress and verdicts come back on a Redis stream written by
the task itself (see workers.jobstore), never through Celery's result backend.

Every key Celery writes sits under `<key_prefix>:celery:` (kombu's global key prefix), so
one Redis database can hold several deployments, and every message uses the default
exchange: routing needs no binding table, which a Redis restart would wipe.
"""

from __future__ import annotations

from pathlib import Path

from celery import Celery
from kombu import Exchange, Queue
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

TASK_NAME = "kplay.evaluate"
DEFAULT_QUEUES = ("gpu.any", "cpu")


class WorkerConfig(BaseSettings):
    """What both ends of the queue read from the environment (KPLAY_<NAME>).

    The fields shared with the web app's Settings keep the same names there, so one
    environment configures a whole deployment.
    """

    model_config = SettingsConfigDict(env_prefix="KPLAY_", extra="ignore")

    broker_url: str | None = None
    # Every key of a deployment starts with this; tests use a fresh one per run.
    key_prefix: str = "kplay"
    # The evaluation child's wall-clock limit for one job (the pool kills it after this).
    job_timeout_s: float = 30.0
    # Runs one user may have queued or running at once; 0 switches the cap off.
    user_run_cap: int = 5
    # How long a fresh evaluation child may take to import its libraries and warm up.
    child_start_timeout_s: float = 60.0
    heartbeat_interval_s: float = 2.0
    heartbeat_ttl_s: float = 10.0
    # How long a finished job's result stays readable by id, for a consumer that was away.
    result_ttl_s: int = 7 * 24 * 3600
    # How long a queued job's ticket (its user, queue and state) lives without news.
    ticket_ttl_s: int = 24 * 3600
    # How long a worker keeps trying to hand back a verdict while Redis is away.
    publish_retry_s: float = 120.0
    # A job whose worker process vanished this many times is ended, not redelivered again.
    max_deliveries: int = 2
    # The function that evaluates one job inside the isolated child.
    eval_target: str = "kplay.kernels.evaluate:evaluate"
    # Jobs per evaluation child before it is replaced (None: never). A replacement takes
    # seconds to warm up (imports, CUDA context), so this bounds a worker's sustained rate
    # of short jobs to about jobs_per_child / warm-up time; the spare hides one warm-up.
    jobs_per_child: int | None = 500
    # Warm evaluation children kept idle beside the busy one, ready when it retires.
    spare_children: int = Field(default=1, ge=0)
    # Shared compile caches and calibrated ceilings; None: the platform's cache folder.
    cache_dir: Path | None = None
    # Set by `kplay worker` for each process it starts: the registry id and device facts.
    worker_id: str | None = None
    worker_info: str | None = None

    @property
    def soft_time_limit_s(self) -> float:
        # The pool already enforces the job's wall clock; Celery's limits are backstops
        # that also cover waiting for a fresh child to warm up.
        return self.job_timeout_s + self.child_start_timeout_s + 10.0

    @property
    def hard_time_limit_s(self) -> float:
        return self.soft_time_limit_s + 15.0

    @property
    def visibility_timeout_s(self) -> float:
        # Above the hard limit, or a job that is still running would be handed out twice.
        return self.hard_time_limit_s + 30.0

    @property
    def celery_key_prefix(self) -> str:
        return f"{self.key_prefix}:celery:"


def capability_queue(name: str) -> Queue:
    # The default exchange routes by queue name alone: nothing to rebuild after a restart.
    return Queue(name, Exchange("", type="direct"), routing_key=name)


def make_celery(config: WorkerConfig | None = None) -> Celery:
    """A Celery app for `config`; the web side only sends with it, workers consume."""
    config = config or WorkerConfig()
    app = Celery("kplay", broker=config.broker_url, include=["kplay.workers.tasks"])
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        result_backend=None,
        task_ignore_result=True,
        task_acks_late=True,
        # A lost pool child ends its job with a verdict (workers.tasks) instead of a
        # redelivery; only a lost worker leaves its message unacknowledged.
        task_reject_on_worker_lost=False,
        task_acks_on_failure_or_timeout=True,
        task_soft_time_limit=config.soft_time_limit_s,
        task_time_limit=config.hard_time_limit_s,
        task_default_queue="gpu.any",
        task_default_exchange="",
        task_queues=[capability_queue(q) for q in DEFAULT_QUEUES],
        task_create_missing_queues=True,
        worker_prefetch_multiplier=1,
        worker_concurrency=1,
        worker_max_tasks_per_child=None,
        worker_hijack_root_logger=False,
        worker_enable_remote_control=False,
        worker_send_task_events=False,
        # The job keeps running through a broker outage and posts its verdict afterwards.
        worker_cancel_long_running_tasks_on_connection_loss=False,
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,
        broker_connection_timeout=4.0,
        broker_pool_limit=4,
        broker_transport_options={
            "global_keyprefix": config.celery_key_prefix,
            "visibility_timeout": config.visibility_timeout_s,
            # Scan for abandoned messages every few seconds instead of every 100.
            "unacked_restore_interval": 5,
            "unacked_restore_throttle": 1,
            "socket_connect_timeout": 4,
            "health_check_interval": 10,
        },
    )
    return app


app = make_celery()
