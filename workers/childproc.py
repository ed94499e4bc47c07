"""The parent's handle on one evaluation child: start, hand a job over, watch, retire.

The child itself is `workers/child.py`; the pool that owns several handles is
`workers/runner.py`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kplay.kernels.models import ProgressEvent, RunJob, RunResult, RunState
from kplay.workers.limits import (
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
        argv = [sys.executable, "-P", "-s", "-m", "kplay.workers.child", str(theirs.fileno())]
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
