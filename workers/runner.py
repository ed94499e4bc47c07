"""A warm pool of isolated evaluation children.

Each child is a fresh interpreter (`python -m workers.child`, started through
subprocess: fork would copy a CUDA context that cannot survive it) in a session of its
own, with a scrubbed environment, a private directory and resource limits. The verdict
returns as JSON over a socket pair; the child's stdout and stderr go to a file whose
tail is attached to the result. A child that hangs, crashes, runs out of memory or
leaves a poisoned CUDA context is killed or retired, and a new one is started.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kernels.models import ProgressEvent, RunJob, RunResult, RunState
from workers.limits import (
    Limits,
    breached_limit,
    child_env,
    output_tail,
    rss_bytes,
    signal_message,
)

log = logging.getLogger(__name__)

EventCallback = Callable[[ProgressEvent], None]

_POLL_S = 0.05
_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


class PoolClosed(RuntimeError):
    pass


class ChildStartError(RuntimeError):
    pass


class _Stop(Exception):
    """Ends a job early; carries the verdict the parent decided on."""

    def __init__(self, state: RunState, message: str) -> None:
        super().__init__(message)
        self.state = state
        self.message = message


class Child:
    """One evaluation child, owned by one caller at a time."""

    def __init__(
        self, limits: Limits, target: str, warm: bool, cache_dir: Path, describe: bool = False
    ) -> None:
        self.limits = limits
        self.machine: dict[str, Any] | None = None
        self.home = Path(tempfile.mkdtemp(prefix="kplay-child-"))
        self.output = self.home / "output.log"
        self.jobs_done = 0
        self.healthy = True
        self.closing = False  # set by the pool when it kills children on close
        self._rss_at_start = 0
        self._conn, theirs = _socket_pair()
        config = {
            "target": target,
            "warm": warm,
            "describe": describe,
            "limits": limits.model_dump(mode="json"),
        }
        # -P keeps the private directory (cwd) off sys.path; -s skips the user's site dir.
        argv = [sys.executable, "-P", "-s", "-m", "workers.child", str(theirs.fileno())]
        try:
            with open(self.output, "ab") as out:
                self.proc = subprocess.Popen(
                    [*argv, json.dumps(config)],
                    cwd=self.home,
                    env=child_env(limits, self.home, cache_dir),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    pass_fds=(theirs.fileno(),),
                    start_new_session=True,
                )
        except OSError:
            self._conn.close()
            shutil.rmtree(self.home, ignore_errors=True)
            raise
        finally:
            theirs.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout_s: float) -> None:
        """Block until the child has warmed up; raise ChildStartError if it cannot."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._conn.poll(_POLL_S):
                try:
                    message = self._recv()
                except (EOFError, OSError):
                    break
                if message.get("type") == "ready":
                    self.machine = message.get("machine")
                    if message.get("error"):
                        log.warning("evaluation child %s: %s", self.pid, message["error"])
                    return
            elif self.exited():
                break
        tail = self.read_tail()
        self.kill()
        raise ChildStartError(f"the evaluation process did not start: {tail or 'no output'}")

    def execute(self, job: RunJob, on_event: EventCallback | None) -> RunResult:
        """Run one job to a final result; never raises for anything the job does."""
        self._truncate_output()
        self._rss_at_start = rss_bytes(self.pid) or 0
        start = time.monotonic()
        try:
            self._send({"type": "job", "job": job.model_dump(mode="json")})
            result = self._follow(job, on_event, start)
        except _Stop as stop:
            result = failure_result(job, stop.message, stop.state)
        wall_ms = (time.monotonic() - start) * 1000.0
        self.jobs_done += 1
        return self._finish(job, result, wall_ms)

    def _follow(self, job: RunJob, on_event: EventCallback | None, start: float) -> RunResult:
        deadline = start + self.limits.wall_timeout_s
        while True:
            if self._conn.poll(_POLL_S):
                message = self._recv_or_death()
                kind = message.get("type")
                if kind == "event":
                    _deliver(on_event, message.get("event"), job)
                elif kind == "result":
                    if message.get("exit"):
                        self.healthy = False  # poisoned: this child must not run another job
                    return self._parse_result(job, message.get("result"))
            # Checked after every message too, so a child that floods the channel still
            # meets its deadline.
            self._watch(deadline)

    def _watch(self, deadline: float) -> None:
        """The checks only the parent can make; raises _Stop to end the job."""
        if self.exited() and not self._conn.poll(0):
            raise _Stop(RunState.runtime_error, self._death_message())
        broken = breached_limit(self.limits, self.pid, self.output, deadline, self._rss_at_start)
        if broken is not None:
            self.kill()
            raise _Stop(*broken)

    def _recv_or_death(self) -> dict[str, Any]:
        try:
            return self._recv()
        except (EOFError, OSError, ValueError):
            # The channel closed or carried garbage: the child is dead or not to be trusted.
            if not self._wait_exit(2.0):
                self.kill()
                raise _Stop(
                    RunState.runtime_error, "the worker process broke its result channel"
                ) from None
            raise _Stop(RunState.runtime_error, self._death_message()) from None

    def _death_message(self) -> str:
        if not self._wait_exit(2.0):
            self.kill()
            return "the worker process stopped answering and was killed"
        self.kill()  # reaps it, and ends anything it started
        code = self.proc.returncode
        if self.closing:
            return "the worker pool was shut down while the job ran"
        if code >= 0:
            return f"the worker process exited with status {code} before it sent a result"
        return signal_message(-code, self.limits)

    def _parse_result(self, job: RunJob, raw: Any) -> RunResult:
        try:
            result = RunResult.model_validate(raw)
        except ValidationError as exc:
            self.healthy = False
            return failure_result(job, f"the worker sent an unreadable result: {exc}")
        # The job's identity comes from the parent, whatever the child claimed.
        return result.model_copy(
            update={"job_id": job.job_id, "problem": job.problem, "backend": job.backend}
        )

    def _finish(self, job: RunJob, result: RunResult, wall_ms: float) -> RunResult:
        limits = self.limits
        if limits.jobs_per_child is not None and self.jobs_done >= limits.jobs_per_child:
            self.healthy = False
        return result.model_copy(
            update={
                "output_tail": self.read_tail() or None,
                "wall_ms": result.wall_ms if result.wall_ms is not None else round(wall_ms, 3),
            }
        )

    # ------------------------------------------------------------ output and channel

    def read_tail(self) -> str:
        return output_tail(self.output, self.limits.output_tail_bytes)

    def _truncate_output(self) -> None:
        # The child writes in append mode, so after this it writes from the start again.
        with contextlib.suppress(OSError):
            self.output.write_bytes(b"")

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self._conn.send_bytes(json.dumps(message).encode())
        except (OSError, ValueError):
            raise _Stop(RunState.runtime_error, self._death_message()) from None

    def _recv(self) -> dict[str, Any]:
        message = json.loads(self._conn.recv_bytes(_MAX_MESSAGE_BYTES))
        if not isinstance(message, dict):
            raise ValueError("message is not an object")
        return message

    # ------------------------------------------------------------ ending

    def exited(self) -> bool:
        """Whether the child has ended, without reaping it.

        An unreaped child keeps its pid, which is also its process group's id, so
        killing that group afterwards cannot hit a stranger that reused the number.
        """
        if self.proc.returncode is not None:
            return True
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

    def _wait_exit(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not self.exited():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def kill(self) -> None:
        """Kill the child's whole process group (it leads its own session), then reap it."""
        self.healthy = False
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            log.error("evaluation child %s did not die after SIGKILL", self.pid)

    def stop(self) -> None:
        """Ask an idle child to leave, kill it if it does not, and remove its directory."""
        if not self.exited():
            with contextlib.suppress(OSError, ValueError):
                self._conn.send_bytes(b'{"type": "stop"}')
            self._wait_exit(2.0)
        self.kill()  # also takes down anything it left behind in its group
        self._conn.close()
        shutil.rmtree(self.home, ignore_errors=True)


def _socket_pair() -> tuple[Connection, socket.socket]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    theirs.set_inheritable(True)
    return Connection(ours.detach()), theirs


def _deliver(on_event: EventCallback | None, raw: Any, job: RunJob) -> None:
    if on_event is None:
        return
    try:
        event = ProgressEvent.model_validate(raw)
    except ValidationError:
        log.warning("dropped an unreadable progress event for job %s", job.job_id)
        return
    try:
        on_event(event.model_copy(update={"job_id": job.job_id}))
    except Exception:  # noqa: BLE001 - a listener's failure must not fail the job
        log.exception("progress listener failed for job %s", job.job_id)


def failure_result(
    job: RunJob, message: str, state: RunState = RunState.runtime_error
) -> RunResult:
    """A final result for a job the evaluator did not finish."""
    return RunResult(
        job_id=job.job_id, problem=job.problem, backend=job.backend, state=state, message=message
    )


DEFAULT_TARGET = "kernels.evaluate:evaluate"


class WorkerPool:
    """`size` evaluation children; `run()` may be called from up to `size` threads at once.

    With `warm`, children start at once and run the target module's `warm_up()` before
    any job; a retired child is replaced in the background. Without it, children start
    when a job needs one and skip warm-up.
    """

    def __init__(
        self,
        size: int,
        limits: Limits | None = None,
        target: str = DEFAULT_TARGET,
        warm: bool = True,
        *,
        describe: bool = False,
    ) -> None:
        if size < 1:
            raise ValueError("a worker pool needs at least one child")
        self.describe = describe
        # What the latest child to start reported about the machine (with `describe`).
        self.machine: dict[str, Any] | None = None
        self.size = size
        self.limits = limits or Limits()
        self.target = target
        self.warm = warm
        self._own_cache = self.limits.cache_dir is None
        self.cache_dir = self.limits.cache_dir or Path(tempfile.mkdtemp(prefix="kplay-cache-"))
        self._slots = threading.BoundedSemaphore(size)
        self._idle: queue.Queue[Child | None] = queue.Queue()
        self._lock = threading.Lock()
        self._children: set[Child] = set()
        self._closed = False
        self._start_error: str | None = None
        if warm:
            for _ in range(size):
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

    def pids(self) -> list[int]:
        """Process ids of the children alive now (idle, busy or starting)."""
        with self._lock:
            return sorted(c.pid for c in self._children if not c.exited())

    def wait_ready(self, timeout_s: float) -> bool:
        """True once every child of a warm pool is started and idle."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._idle.qsize() >= self.size:
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

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ children

    def _take(self) -> Child:
        while True:
            child = self._take_any()
            if not child.exited():
                return child
            # It died while idle (the OOM killer, say): not this job's fault.
            log.warning("evaluation child %s died while idle", child.pid)
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
            child = Child(self.limits, self.target, self.warm, self.cache_dir, describe)
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
