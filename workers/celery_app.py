"""The Celery side of the distributed mode: its settings and the app factory.

Celery carries only the job (JSON, one message per run) to a worker that consumes the
right capability queue. Progress and verdicts come back on a Redis stream written by
the task itself (see workers.jobstore), never through Celery's result backend.

Every key Celery writes sits under `<key_prefix>:celery:` (kombu's global key prefix), so
one Redis database can hold several deployments, and every message uses the default
exchange: routing needs no binding table, which a Redis restart would wipe.
"""

from __future__ import annotations

from celery import Celery
from kombu import Exchange, Queue

from kplay.config import WorkerSettings

TASK_NAME = "kplay.evaluate"
DEFAULT_QUEUES = ("gpu.any", "cpu")


class WorkerConfig(WorkerSettings):
    """The worker settings (kplay.config) with the Celery limits derived from them.

    It declares no setting of its own: every KPLAY_ variable is defined in kplay.config, and
    the fields shared with the web app's settings are the same fields there.
    """

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
