"""A warm pool of isolated evaluation children.

Each child is a fresh interpreter (`python -m workers.child`, started through
subprocess: fork would copy a CUDA context that cannot survive it) in a session of its
own, with a scrubbed environment, a private directory and resource limits. The verdict
returns as JSON over a socket pair; the child's stdout and stderr go to a file whose
tail is attached to the result. A child that hangs, crashes, runs out of memory or
leaves a poisoned CUDA context is killed or retired, and a new one is started.
The handle on one child is `workers.childproc.Child`.
"""

from __future__ import annotations

import logging
import queue
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from kplay.kernels.models import RunJob, RunResult
from kplay.workers.childproc import (
    _POLL_S,
    Child,
    ChildStartError,
    EventCallback,
    failure_result,
)
from kplay.workers.limits import Limits
from kplay.workers.sandbox import Sandbox, SandboxConfig, SandboxStatus, prepare

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_TARGET", "ChildStartError", "PoolClosed", "WorkerPool", "failure_result"]


class PoolClosed(RuntimeError):
    pass


DEFAULT_TARGET = "kplay.kernels.evaluate:evaluate"


class WorkerPool:
    """`size` evaluation children; `run()` may be called from up to `size` threads at once.

    With `warm`, children start at once and run the target module's `warm_up()` before
    any job; a retired child is replaced in the background. Without it, children start
    when a job needs one and skip warm-up.

    `spares` more warm children wait idle, so that a job arriving just after a child
    retired (its job budget spent, its CUDA context poisoned, or killed) starts at once
    instead of waiting seconds for a replacement's imports. Idle children are reused
    most-recently-used first, so spares stay idle and the busy child's caches stay warm.
    """

    def __init__(
        self,
        size: int,
        limits: Limits | None = None,
        target: str = DEFAULT_TARGET,
        warm: bool = True,
        *,
        describe: bool = False,
        spares: int = 0,
        sandbox: SandboxConfig | None = None,
        learner_boxes: bool | None = None,
    ) -> None:
        if size < 1:
            raise ValueError("a worker pool needs at least one child")
        if spares < 0:
            raise ValueError("spares cannot be negative")
        # KPLAY_SANDBOX and friends unless `sandbox` says otherwise; SandboxUnavailable
        # where it is required and cannot be had. `sandbox` is what the app reports: where
        # it is not active, children are plain processes (trusted local mode).
        self.sandbox: SandboxStatus
        self._sandbox, self.sandbox = prepare(sandbox)
        self.spares = spares if warm else 0
        self.describe = describe
        # What the latest child to start reported about the machine (with `describe`).
        self.machine: dict[str, Any] | None = None
        self.size = size
        self.limits = limits or Limits()
        self.target = target
        # The engine's evaluator runs learner code only in a box of its own (workers/learner).
        self.learner_boxes = target == DEFAULT_TARGET if learner_boxes is None else learner_boxes
        self.warm = warm
        self._own_cache = self.limits.cache_dir is None
        self.cache_dir = self.limits.cache_dir or Path(tempfile.mkdtemp(prefix="kplay-cache-"))
        self._slots = threading.BoundedSemaphore(size)
        self._idle: queue.LifoQueue[Child | None] = queue.LifoQueue()
        self._lock = threading.Lock()
        self._children: set[Child] = set()
        self._closed = False
        self._start_error: str | None = None
        if warm:
            for _ in range(size + self.spares):
                self._replace_in_background(None)

    # ------------------------------------------------------------ public

    def run(self, job: RunJob, on_event: EventCallback | None = None) -> RunResult:
        """Evaluate `job` in a child and return its final result; blocks until then."""
        if self._closed:
            raise PoolClosed("the worker pool is closed")
        with self._slots:
            try:
                child = self._take()
            except ChildStartError as exc:
                return failure_result(job, str(exc))
            try:
                result = child.execute(job, on_event)
            except Exception as exc:  # noqa: BLE001 - a bug here must still end the run
                log.exception("evaluation of job %s failed in the runner", job.job_id)
                child.kill()
                result = failure_result(job, f"the runner failed: {type(exc).__name__}: {exc}")
            self._give_back(child)
            return result

    @property
    def box_sandbox(self) -> Sandbox | None:
        """The sandbox this pool starts its children in; None: plain processes."""
        return self._sandbox

    def pids(self) -> list[int]:
        """Process ids of the children alive now (idle, busy or starting)."""
        with self._lock:
            return sorted(c.pid for c in self._children if not c.exited())

    def wait_ready(self, timeout_s: float) -> bool:
        """True once every child of a warm pool, spares included, is started and idle."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._idle.qsize() >= self.size + self.spares:
                return True
            time.sleep(_POLL_S)
        return False

    def close(self) -> None:
        """Stop every child; jobs still running end with a runtime_error."""
        self._closed = True
        while True:
            try:
                child = self._idle.get_nowait()
            except queue.Empty:
                break
            if child is not None:
                self._discard(child)
                child.stop()
        with self._lock:
            remaining = list(self._children)
        for child in remaining:
            child.closing = True
            child.kill()
        for _ in range(self.size):
            self._idle.put(None)  # wakes callers waiting for a child
        if self._own_cache:
            shutil.rmtree(self.cache_dir, ignore_errors=True)
        if self._sandbox is not None:
            self._sandbox.close()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ children

    def _take(self) -> Child:
        while True:
            child = self._take_any()
            if child.exited():
                # It died while idle (the OOM killer, say): not this job's fault.
                log.warning("evaluation child %s died while idle", child.pid)
            elif child.wrote_between_jobs():
                # Code of an earlier job left something on the channel; whatever it is, it
                # must not meet this job. A fresh child takes the job.
                log.warning("evaluation child %s wrote while idle; replaced", child.pid)
                child.kill()
            else:
                return child
            self._give_back(child)

    def _take_any(self) -> Child:
        if not self.warm:
            try:
                child = self._idle.get_nowait()
            except queue.Empty:
                return self._start_child()
        else:
            try:
                child = self._idle.get(timeout=self.limits.start_timeout_s + 5.0)
            except queue.Empty:
                raise ChildStartError(
                    self._start_error or "no evaluation process became ready in time"
                ) from None
        if child is None:
            raise ChildStartError("the worker pool was closed before the job started")
        return child

    def _give_back(self, child: Child) -> None:
        if not self._closed and child.healthy and not child.exited():
            self._idle.put(child)
            return
        self._discard(child)
        if self.warm and not self._closed:
            self._replace_in_background(child)
        else:
            child.stop()

    def _start_child(self) -> Child:
        try:
            # One description is enough; later children skip the backend imports it needs.
            describe = self.describe and self.machine is None
            child = Child(
                self.limits, self.target, self.warm, self.cache_dir, describe, self._sandbox,
                learner_boxes=self.learner_boxes,
            )  # fmt: skip
        except OSError as exc:
            raise ChildStartError(f"could not start an evaluation process: {exc}") from exc
        with self._lock:
            self._children.add(child)
        try:
            child.wait_ready(self.limits.start_timeout_s)
        except ChildStartError:
            self._discard(child)
            child.stop()
            raise
        if child.machine is not None:
            self.machine = child.machine
        return child

    def _discard(self, child: Child) -> None:
        with self._lock:
            self._children.discard(child)

    def _replace_in_background(self, old: Child | None) -> None:
        thread = threading.Thread(
            target=self._replace, args=(old,), name="kplay-child-start", daemon=True
        )
        thread.start()

    def _replace(self, old: Child | None) -> None:
        if old is not None:
            old.stop()
        delay = 0.5
        while not self._closed:
            try:
                child = self._start_child()
            except ChildStartError as exc:
                if self._closed:
                    return  # the pool closed while this child started: nothing went wrong
                self._start_error = str(exc)
                log.error("%s; retrying in %.1f s", exc, delay)
                time.sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            self._start_error = None
            if self._closed:
                self._discard(child)
                child.stop()
            else:
                self._idle.put(child)
            return
