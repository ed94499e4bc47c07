"""The one Celery task: a thin shell around the warm evaluation pool.

Each worker process runs Celery's prefork pool with one child. That child holds a warm
`WorkerPool(size=1)` (the evaluation itself runs one process further down, where a
kernel may crash) and the fleet heartbeat. Events and the verdict go to Redis through
`JobStore`; Celery's result backend is not used.

What can go wrong, and what the job then becomes:
- the kernel crashes, hangs or floods: the pool's verdict, published as usual;
- the pool child dies (a kernel killed its parent) or hits the hard time limit: Celery's
  main process acknowledges the message and `_on_task_failure` publishes the verdict;
- the whole worker is lost: the message stays unacknowledged and is redelivered (by
  Redis's visibility timeout, or sooner by the web side's janitor). The start counter
  ends the job after `max_deliveries` starts, so a kernel that kills its worker cannot
  take the fleet down in a loop.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from typing import Any

import redis
from celery import signals
from celery.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded, WorkerLostError
from tenacity import (
    RetryError,
    Retrying,
    before_sleep_log,
    retry_if_exception_type,
    stop_after_delay,
    wait_exponential,
)

from kplay.kernels.models import Ceilings, ProgressEvent, RunJob, RunResult, RunState
from kplay.workers.celery_app import TASK_NAME, WorkerConfig, app
from kplay.workers.fleet import Heartbeat
from kplay.workers.fleet_models import Clocks, LiveFacts, WorkerInfo
from kplay.workers.jobstore import JobStore, connect, user_key
from kplay.workers.limits import Limits
from kplay.workers.profiling import Profiler
from kplay.workers.recovery import LOST_TWICE
from kplay.workers.runner import WorkerPool, failure_result
from kplay.workers.signing import MissingResultKey, Signer

log = logging.getLogger(__name__)


class Runtime:
    """Per worker process: config, Redis, the warm pool and the heartbeat."""

    def __init__(self, config: WorkerConfig, with_pool: bool = True) -> None:
        if not config.broker_url:
            raise RuntimeError("KPLAY_BROKER_URL is not set")
        self.config = config
        self.store = JobStore(
            connect(config.broker_url),
            config.key_prefix,
            config.ticket_ttl_s,
            config.result_ttl_s,
            # The key stays in this process: the evaluation children never receive it.
            signer=Signer.for_settings(config),
        )
        self.info = worker_info(config)
        self.worker_id = self.info.id
        self.pool: WorkerPool | None = None
        self.heartbeat: Heartbeat | None = None
        if with_pool:
            self.pool = WorkerPool(
                size=1,
                limits=job_limits(config),
                target=config.eval_target,
                warm=True,
                spares=config.spare_children,
            )
            # The fleet shows whether this worker's children are sandboxed.
            self.info = self.info.model_copy(
                update={"sandbox": self.pool.sandbox.model_dump(mode="json")}
            )
            self.heartbeat = Heartbeat(
                self.store,
                self.info,
                config.heartbeat_interval_s,
                config.heartbeat_ttl_s,
                extra=self._live_facts,
            )
            self.heartbeat.start()

    def run(self, job: RunJob, queue: str) -> None:
        if self._already_finished(job):
            return
        if self.store.count_start(job.job_id) > self.config.max_deliveries:
            self.publish(failure_result(job, LOST_TWICE), job, queue)
            return
        assert self.pool is not None and self.heartbeat is not None
        self.store.mark_running(job, queue, self.worker_id)
        self.heartbeat.begin(job, queue)
        started = time.monotonic()
        try:
            result = self._evaluate(job)
            # Still announced as this worker's job until the verdict is out: the janitor
            # takes a running job that no live worker announces for a lost one.
            self.publish(result, job, queue, time.monotonic() - started)
        finally:
            self.heartbeat.end()

    def _evaluate(self, job: RunJob) -> RunResult:
        assert self.pool is not None
        soft = self.config.soft_time_limit_s
        try:
            if job.mode == "profile":
                return self._profiler().run(job)
            result = self.pool.run(job, on_event=self._event)
        except SoftTimeLimitExceeded:
            return failure_result(job, _soft_limit_message(soft), RunState.timeout)
        except Exception as exc:  # noqa: BLE001 - every job must end with a verdict
            log.exception("job %s failed in the worker", job.job_id)
            return failure_result(job, f"the worker failed: {type(exc).__name__}: {exc}")
        # The pool turns an exception raised inside it into a runtime_error; the soft
        # limit's exception is one of those and means the job ran out of time.
        if result.state is RunState.runtime_error and "SoftTimeLimitExceeded" in (
            result.message or ""
        ):
            return result.model_copy(
                update={"state": RunState.timeout, "message": _soft_limit_message(soft)}
            )
        return result

    def _profiler(self) -> Profiler:
        assert self.pool is not None
        return Profiler(
            self.pool.box_sandbox,
            job_limits(self.config),
            self.config.profile_timeout_s,
            self.pool.cache_dir / "locks",
        )

    def _already_finished(self, job: RunJob) -> bool:
        # A redelivery of a job whose verdict was stored (the worker died after publishing
        # but before acknowledging): nothing to do.
        if self.store.finished(job.job_id) is not None:
            log.info("job %s already has a verdict; not run again", job.job_id)
            return True
        return False

    def _event(self, event: ProgressEvent) -> None:
        try:
            self.store.publish_event(event, self.worker_id)
        except redis.RedisError as exc:  # progress is a nicety; the verdict is retried
            log.debug("dropped a progress event for %s: %s", event.job_id, exc)

    def publish(
        self, result: RunResult, job: RunJob, queue: str, duration_s: float | None = None
    ) -> bool:
        """Hand the verdict back, retrying while Redis is away (it may be restarting).

        True when stored; False when the job already had a verdict, or when Redis stayed
        away for `publish_retry_s`.
        """
        retrying = Retrying(
            retry=retry_if_exception_type((redis.ConnectionError, redis.TimeoutError)),
            wait=wait_exponential(multiplier=0.2, max=5.0),
            stop=stop_after_delay(self.config.publish_retry_s),
            before_sleep=before_sleep_log(log, logging.WARNING),
        )
        try:
            return retrying(
                self.store.finish,
                result,
                user=user_key(job),
                queue=queue,
                worker=self.worker_id,
                duration_s=duration_s,
            )
        except RetryError as exc:
            cause = exc.last_attempt.exception()
            log.error("could not publish the verdict of %s: %s", job.job_id, cause)
            return False

    def _live_facts(self) -> LiveFacts:
        from kplay.kernels.hardware import read_clocks
        from kplay.workers.plan import load_ceilings

        found = load_ceilings(self.info.facts())
        facts = LiveFacts(ceilings=None if found is None else Ceilings.model_validate(found))
        if self.info.kind == "gpu" and self.info.gpu_index is not None:
            clocks = read_clocks(self.info.gpu_index)
            facts.clocks = None if clocks is None else Clocks.model_validate(clocks.model_dump())
        return facts

    def close(self) -> None:
        if self.heartbeat is not None:
            self.heartbeat.stop()
        if self.pool is not None:
            self.pool.close()


def _soft_limit_message(limit_s: float) -> str:
    return f"the worker stopped this job after {limit_s:g} s (its soft time limit)"


def job_limits(config: WorkerConfig) -> Limits:
    cache = config.cache_dir / "jobs" if config.cache_dir else None
    return Limits(
        wall_timeout_s=config.job_timeout_s,
        start_timeout_s=config.child_start_timeout_s,
        jobs_per_child=config.jobs_per_child,
        cache_dir=cache,
        # The engine finds the calibrated ceilings where `kplay worker` put them.
        pass_env=["KPLAY_CACHE_DIR", "KPLAY_NO_AUTO_CALIBRATE"],
    )


def worker_info(config: WorkerConfig) -> WorkerInfo:
    """This process's registry entry: set by `kplay worker`, or guessed for a bare worker."""
    import json

    if config.worker_info:
        info: dict[str, Any] = json.loads(config.worker_info)
    else:
        info = {"kind": "cpu", "device": socket.gethostname(), "queues": _argv_queues()}
    info.setdefault("host", socket.gethostname())
    info["id"] = config.worker_id or info.get("id") or f"{socket.gethostname()}-{os.getppid()}"
    return WorkerInfo.model_validate(info)


def _argv_queues() -> list[str]:
    argv = sys.argv
    for flag in ("-Q", "--queues"):
        if flag in argv[:-1]:
            return argv[argv.index(flag) + 1].split(",")
    return []


# ---------------------------------------------------------------- Celery wiring

_runtime: Runtime | None = None
_main_runtime: Runtime | None = None


def runtime() -> Runtime:
    global _runtime
    if _runtime is None:
        _runtime = Runtime(WorkerConfig())
    return _runtime


@signals.worker_init.connect
def _refuse_without_key(**_: Any) -> None:
    """A worker that could not sign its verdicts must not take jobs off the queue."""
    try:
        Signer.for_settings(WorkerConfig())
    except MissingResultKey as exc:
        log.critical("%s", exc)
        # SystemExit, unlike an Exception, is not swallowed by Celery's signal dispatch.
        raise SystemExit(f"kplay worker: {exc}") from None


@signals.worker_process_init.connect
def _start_process(**_: Any) -> None:
    # Warm the evaluation child and start beating before the first job arrives.
    runtime()


@signals.worker_process_shutdown.connect
def _stop_process(**_: Any) -> None:
    global _runtime
    if _runtime is not None:
        _runtime.close()
        _runtime = None


@app.task(name=TASK_NAME, bind=True)
def evaluate_job(self: Any, job_json: str) -> None:
    job = RunJob.model_validate_json(job_json)
    queue = (self.request.delivery_info or {}).get("routing_key") or "?"
    runtime().run(job, queue)


@signals.task_failure.connect
def _on_task_failure(
    sender: Any = None,
    task_id: str | None = None,
    exception: BaseException | None = None,
    args: Any = None,
    **_: Any,
) -> None:
    """Publish a verdict for a job whose pool child died or hit the hard limit.

    Runs in Celery's main process, which has no runtime of its own: a small one without
    a pool is made on first need.
    """
    if getattr(sender, "name", None) != TASK_NAME or not args:
        return
    global _main_runtime
    try:
        job = RunJob.model_validate_json(args[0])
        if _main_runtime is None:
            _main_runtime = Runtime(WorkerConfig(), with_pool=False)
        rt = _main_runtime
        ticket = rt.store.ticket(job.job_id) or {}
        if isinstance(exception, TimeLimitExceeded):
            limit = rt.config.hard_time_limit_s
            message = f"the worker stopped this job after {limit:g} s (its hard time limit)"
            result = failure_result(job, message, RunState.timeout)
        elif isinstance(exception, WorkerLostError):
            message = (
                "the worker process running this job died "
                f"({type(exception).__name__}: {exception}); it is not run again"
            )
            result = failure_result(job, message)
        else:
            result = failure_result(
                job, f"the worker failed: {type(exception).__name__}: {exception}"
            )
        rt.publish(result, job, ticket.get("queue", "?"))
    except Exception:  # noqa: BLE001 - a signal handler must never take the worker down
        log.exception("could not publish the failure of task %s", task_id)
