"""The embedded executor: a FIFO queue in this process feeding a warm child-process pool.

Dispatcher threads (one per child) take jobs in submission order, run them through
the WorkerPool and hand events and results to the sink. Whatever goes wrong on the way,
every submitted job ends with exactly one RunResult delivered.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kplay.config import EngineSettings, WorkerSettings
from kplay.kernels.hardware import has_cuda_gpu
from kplay.kernels.models import ProgressEvent, RunJob, RunResult
from kplay.workers.executor import Executor, ResultSink, SubmitRefused
from kplay.workers.limits import Limits
from kplay.workers.profiling import Profiler
from kplay.workers.runner import DEFAULT_TARGET, PoolClosed, WorkerPool, failure_result
from kplay.workers.sandbox import SandboxStatus
from kplay.workers.waits import Durations, Kind, load, save, start_in_s

log = logging.getLogger(__name__)


class LocalExecutor(Executor):
    def __init__(
        self,
        size: int = 1,
        limits: Limits | None = None,
        target: str = DEFAULT_TARGET,
        warm: bool = True,
        max_queued: int | None = 100,
        durations_file: Path | Sequence[Path] | None = None,
    ) -> None:
        if size < 1:
            raise ValueError("a local executor needs at least one worker")
        self.size = size
        self.limits = limits or Limits()
        self.target = target
        self.warm = warm
        self.max_queued = max_queued
        self._pool: WorkerPool | None = None
        self._sink: ResultSink | None = None
        self._queue: collections.deque[RunJob] = collections.deque()
        # What each dispatcher is evaluating, and since when (monotonic seconds).
        self._running: dict[str, tuple[RunJob, float]] = {}
        # Where the durations are kept across restarts (none: not kept); what an earlier
        # server kept in the first file that has any is the prior of the wait estimates
        # (workers.waits), and every file gets this server's.
        if durations_file is None:
            self.durations_files: list[Path] = []
        elif isinstance(durations_file, Path):
            self.durations_files = [durations_file]
        else:
            self.durations_files = list(durations_file)
        prior = next(filter(None, map(load, self.durations_files)), None)
        self.durations = Durations(prior=prior)
        self._saved_at = 0.0
        # Jobs taken since start: the first of each fresh child is left out of the durations.
        self._taken = 0
        self._firsts: set[str] = set()
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._stopping = False

    # ------------------------------------------------------------ Executor

    def start(self, sink: ResultSink) -> None:
        if self._pool is not None:
            raise RuntimeError("the executor is already started")
        self._sink = sink
        self._pool = WorkerPool(self.size, self.limits, self.target, self.warm, describe=True)
        for i in range(self.size):
            thread = threading.Thread(
                target=self._dispatch, name=f"kplay-dispatch-{i}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def submit(self, job: RunJob) -> None:
        with self._cond:
            if self._pool is None or self._stopping:
                raise SubmitRefused("the local executor is not running; restart the server")
            if job.mode == "profile":
                why = Profiler.unavailable() if has_cuda_gpu() else "this server has no GPU"
                if why:
                    raise SubmitRefused(f"cannot profile here: {why}")
            if self.max_queued is not None and len(self._queue) >= self.max_queued:
                raise SubmitRefused(
                    f"{len(self._queue)} runs are already waiting; try again in a moment"
                )
            self._queue.append(job)
            self._cond.notify()

    def queue_position(self, job_id: str) -> int | None:
        with self._cond:
            if job_id in self._running:
                return 0
            for index, job in enumerate(self._queue):
                if job.job_id == job_id:
                    # Ahead of it: the jobs queued before it and those being evaluated.
                    return index + len(self._running)
            return None

    def wait_estimate_s(self, job_id: str) -> float | None:
        """Seconds until the job should start (workers.waits): what runs now and what is
        queued ahead of it, each by the recent durations of jobs of its kind."""
        with self._cond:
            if job_id in self._running:
                return 0.0
            ahead: list[RunJob] = []
            for job in self._queue:
                if job.job_id == job_id:
                    break
                ahead.append(job)
            else:
                return None
            now = time.monotonic()
            running = [(kind_of(j), now - t) for j, t in self._running.values()]
        estimate = start_in_s(
            running,
            [kind_of(j) for j in ahead],
            self.size,
            self.durations.samples,
            self.limits.wall_timeout_s,
        )
        return None if estimate is None else round(estimate, 1)

    @property
    def sandbox(self) -> SandboxStatus | None:
        """What the children run in (None before start); not `active`: trusted local mode."""
        return self._pool.sandbox if self._pool is not None else None

    def devices(self) -> list[dict[str, Any]]:
        machine = self._pool.machine if self._pool is not None else None
        if machine is None:
            # No child has reported yet; say what is known without importing GPU libraries.
            machine = describe_without_child()
        return [
            {
                **machine,
                "executor": "local",
                "queue": "local",
                "workers": self.size,
                "cpu_count": os.cpu_count(),
                "sandbox": None if self.sandbox is None else self.sandbox.model_dump(mode="json"),
            }
        ]

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            left = list(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        for job in left:
            self._deliver(failure_result(job, "the server stopped before this run started"))
        if self._pool is not None:
            self._pool.close()
        for thread in self._threads:
            thread.join(timeout=10.0)
        self._threads.clear()
        self._save(force=True)

    # ------------------------------------------------------------ dispatching

    def _next_job(self) -> RunJob | None:
        with self._cond:
            while not self._queue and not self._stopping:
                self._cond.wait()
            if self._stopping:
                return None
            job = self._queue.popleft()
            self._running[job.job_id] = (job, time.monotonic())
            self._taken += 1
            if self._taken <= self.size:
                self._firsts.add(job.job_id)
            return job

    def _dispatch(self) -> None:
        while True:
            job = self._next_job()
            if job is None:
                return
            try:
                result = self._evaluate(job)
            finally:
                with self._cond:
                    _, started = self._running.pop(job.job_id)
                    # The pool's children all start with the server: the first `size` jobs
                    # are each one's first, which pays for imports and compilations later
                    # jobs find done (3x a later job's time on a busy 2-CPU machine). A mean
                    # that kept them would overstate every wait while they are recent.
                    first_of_child = job.job_id in self._firsts
                    self._firsts.discard(job.job_id)
                # The worker's hold time: from taking the job to its verdict, as a waiting
                # job sees it (a child's start or replacement included).
                if not first_of_child:
                    self.durations.add(kind_of(job), time.monotonic() - started)
                    self._save()
            self._deliver(result)

    def _save(self, force: bool = False) -> None:
        """Keep the durations for a later server, at most every SAVE_EVERY_S seconds."""
        if not self.durations_files:
            return
        with self._cond:
            now = time.monotonic()
            if not force and now - self._saved_at < SAVE_EVERY_S:
                return
            self._saved_at = now
        for path in self.durations_files:
            try:
                save(self.durations, path)
            except OSError as exc:
                log.warning("could not keep the run durations in %s: %s", path, exc)

    def _evaluate(self, job: RunJob) -> RunResult:
        assert self._pool is not None
        try:
            if job.mode == "profile":
                settings = WorkerSettings()
                lock_dir = EngineSettings().cache_root() / "locks"
                profiler = Profiler(
                    self._pool.box_sandbox, self.limits, settings.profile_timeout_s, lock_dir
                )
                return profiler.run(job)
            return self._pool.run(job, on_event=self._event)
        except PoolClosed:
            return failure_result(job, "the server stopped while this run was starting")
        except Exception as exc:  # noqa: BLE001 - the run must still end with a result
            log.exception("executor failed on job %s", job.job_id)
            return failure_result(job, f"internal error in the executor: {exc}")

    def _event(self, event: ProgressEvent) -> None:
        if self._sink is not None:
            self._sink.on_event(event)

    def _deliver(self, result: RunResult) -> None:
        if self._sink is None:
            return
        try:
            self._sink.on_result(result)
        except Exception:  # noqa: BLE001 - a failing sink must not stop the dispatcher
            log.exception("result sink failed for job %s", result.job_id)


# How often the durations are written to their file while jobs finish.
SAVE_EVERY_S = 10.0


def kind_of(job: RunJob) -> Kind:
    """What a job's duration is counted with (workers.waits)."""
    return (job.problem, job.backend, job.mode)


# ---------------------------------------------------------------- the local machine


def describe_without_child() -> dict[str, Any]:
    """This machine as far as the server process may look: `kernels.hardware` only.

    Backend capabilities need GPU libraries imported under the child's environment, so
    they read "unknown" until the first child reports them.
    """
    from kplay.kernels import hardware
    from kplay.kernels.backends import registry

    gpus = hardware.gpu_count()
    return {
        "name": hardware.device_name(),
        "kind": "gpu" if gpus else "cpu",
        "gpus": gpus,
        "backends": {key: "unknown" for key in sorted(registry())},
    }
