"""The parent's handle on one evaluation child: start, hand a job over, watch, retire.

The child itself is `workers/child.py`; the pool that owns several handles is
`workers/runner.py`.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError

from kplay.kernels.models import ProgressEvent, RunJob, RunResult, RunState
from kplay.workers.channel import BadMessage, Channel, ChannelClosed
from kplay.workers.learner import LearnerSlot, start_ahead, start_process
from kplay.workers.limits import (
    PHASE_WORDS,
    Limits,
    breached_limit,
    death_state,
    describe_bytes,
    failure_result,
    output_tail,
    signal_message,
)
from kplay.workers.proctree import Usage
from kplay.workers.sandbox import Sandbox

log = logging.getLogger(__name__)

EventCallback = Callable[[ProgressEvent], None]

_POLL_S = 0.05
_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# The verdict of a job whose child wrote what the protocol does not allow: learner code in
# the child can reach the channel, so whatever it said is not reported.
UNEXPECTED_MESSAGE = "the evaluation child sent an unexpected message on its private channel"


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
        self,
        limits: Limits,
        target: str,
        warm: bool,
        cache_dir: Path,
        describe: bool = False,
        sandbox: Sandbox | None = None,
        learner_boxes: bool = False,
    ) -> None:
        self.limits = limits
        self.machine: dict[str, Any] | None = None
        self.home = Path(tempfile.mkdtemp(prefix="kplay-child-"))
        self.output = self.home / "output.log"
        self.jobs_done = 0
        self.healthy = True
        self.closing = False  # set by the pool when it kills children on close
        self._used_at_start = Usage()
        self._chan, theirs = _socket_pair()
        child_limits = sandbox.child_limits(limits) if sandbox is not None else limits
        config = {
            "target": target,
            "warm": warm,
            "describe": describe,
            "limits": child_limits.model_dump(mode="json"),
        }
        # Learner code runs in a box of its own; the child gets each box's socket on this.
        self.learner: LearnerSlot | None = None
        self._carrier: socket.socket | None = None
        carried: socket.socket | None = None
        if learner_boxes:
            self._carrier, carried = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            carried.set_inheritable(True)
            config["boxes_fd"] = carried.fileno()
        # -P keeps the private directory (cwd) off sys.path; -s skips the user's site dir.
        argv = [sys.executable, "-P", "-s", "-m", "kplay.workers.child", str(theirs.fileno())]
        fds = (theirs.fileno(), *((carried.fileno(),) if carried is not None else ()))
        try:
            with open(self.output, "ab") as out:
                command = [*argv, json.dumps(config)]
                self.box = start_process(command, self.home, out, fds, limits, cache_dir, sandbox)
            self.proc = self.box.proc
            if learner_boxes:
                self.learner = LearnerSlot(child_limits, cache_dir, sandbox, self.output)
                self.learner.start()
        except OSError:
            self._chan.close()
            if self._carrier is not None:
                self._carrier.close()
            shutil.rmtree(self.home, ignore_errors=True)
            raise
        finally:
            theirs.close()
            if carried is not None:
                carried.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout_s: float) -> None:
        """Block until the child has warmed up; raise ChildStartError if it cannot."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if self._chan.poll(_POLL_S):
                    message = self._chan.recv()
                    if message.get("type") != "ready":
                        break  # the first message is "ready", or the child is not to be trusted
                    machine = message.get("machine")
                    self.machine = machine if isinstance(machine, dict) else None
                    if message.get("error"):
                        log.warning("evaluation child %s: %s", self.pid, message["error"])
                    return
            except (BadMessage, ChannelClosed, OSError):
                break
            if self.exited():
                break
        tail = self.read_tail()
        self.kill()
        raise ChildStartError(f"the evaluation process did not start: {tail or 'no output'}")

    def execute(self, job: RunJob, on_event: EventCallback | None) -> RunResult:
        """Run one job to a final result; never raises for anything the job does."""
        if self.learner is not None:
            with contextlib.suppress(OSError):  # a box that never got ready fails the job
                self.learner.wait_ready(self.limits.start_timeout_s, job)
        self._truncate_output()
        self._used_at_start = self.box.begin_job(self.limits.memory_bytes)
        start = time.monotonic()
        # Every message about this job must carry the nonce; nothing written before the job
        # was handed over, or by an earlier job, can.
        nonce = secrets.token_hex(16)
        message: dict[str, Any] = {"type": "job", "job": job.model_dump(mode="json")}
        message["nonce"] = nonce
        self.box_used, self.box_kept = True, False  # unless the child says otherwise
        self._phase: RunState | None = None  # the job's last phase, from its events
        try:
            if self.learner is not None and self._carrier is not None:
                ahead = start_ahead(job)
                new = self.learner.hand_over(self._carrier, ahead, job)
                message["box"] = "new" if new else "same"
            self._send(message)
            result = self._follow(job, nonce, on_event, start)
        except _Stop as stop:
            result = failure_result(job, stop.message, stop.state, self._phase)
        except OSError as exc:
            result = failure_result(job, f"the learner's box could not be handed over: {exc}")
        if self.learner is not None:
            kept = self.box_kept and not self.exited()
            result = self.learner.after_job(result, self.box_used or self.exited(), job, kept)
        # Nothing a job started outlives it: compilers, background processes, daemons.
        if not self.exited():
            self.box.sweep()
        wall_ms = (time.monotonic() - start) * 1000.0
        self.jobs_done += 1
        return self._finish(job, result, wall_ms)

    def _follow(
        self, job: RunJob, nonce: str, on_event: EventCallback | None, start: float
    ) -> RunResult:
        deadline = start + self.limits.wall_timeout_s
        while True:
            if self._poll_or_reject(_POLL_S):
                message = self._recv_or_death()
                kind = self._check(message, nonce)
                if kind == "event":
                    self._deliver(on_event, message["event"], job)
                else:
                    if message["exit"]:
                        self.healthy = False  # poisoned: this child must not run another job
                    self.box_used = message.get("box_used") is not False
                    self.box_kept = message.get("box_kept") is True
                    result = self._parse_result(job, message["result"])
                    if self.wrote_between_jobs():
                        # More after its one result: nothing of it may reach the next job.
                        log.warning("evaluation child %s wrote after its result; killed", self.pid)
                        self.kill()
                    return result
            # Checked after every message too, so a child that floods the channel still
            # meets its deadline.
            self._watch(deadline)

    def _check(self, message: dict[str, Any], nonce: str) -> str:
        """The kind of a message that belongs to the running job; ends the child otherwise."""
        kind = message.get("type")
        given = message.get("nonce")
        if not isinstance(given, str) or not hmac.compare_digest(given.encode(), nonce.encode()):
            self._reject("a message without the job's nonce" if given is None else "a wrong nonce")
        if kind == "event" and "event" in message:
            return kind
        if kind == "result" and "result" in message and isinstance(message.get("exit"), bool):
            return kind
        self._reject(f"a message of type {str(kind)[:40]!r} that the protocol lacks")

    def _reject(self, why: str) -> NoReturn:
        """Kill a child that broke the protocol; its job ends with UNEXPECTED_MESSAGE."""
        log.warning("evaluation child %s broke the channel protocol (%s); killed", self.pid, why)
        self.kill()
        raise _Stop(RunState.runtime_error, UNEXPECTED_MESSAGE)

    def wrote_between_jobs(self) -> bool:
        """Whether bytes wait on the channel that no running job accounts for.

        Between jobs the child has nothing to say; anything there was written by code of an
        earlier job, and must never reach the next one, so such a child is retired.
        """
        try:
            return self._chan.pending()
        except OSError:
            return True

    def _watch(self, deadline: float) -> None:
        """The checks only the parent can make; raises _Stop to end the job."""
        if self.exited() and not self._poll_or_reject(0):
            raise _Stop(*self._death())
        spent = self.box.usage() - self._used_at_start
        broken = breached_limit(self.limits, self.output, deadline, spent)
        if broken is not None:
            self.kill()
            raise _Stop(*broken)

    def _poll_or_reject(self, timeout_s: float) -> bool:
        try:
            return self._chan.poll(timeout_s)
        except BadMessage as exc:
            self._reject(str(exc))

    def _recv_or_death(self) -> dict[str, Any]:
        try:
            return self._chan.recv()
        except BadMessage as exc:
            self._reject(str(exc))
        except (ChannelClosed, OSError):
            # The channel closed: the child is dead, or not to be trusted.
            if not self._wait_exit(2.0):
                self.kill()
                raise _Stop(
                    RunState.runtime_error, "the worker process broke its result channel"
                ) from None
            raise _Stop(*self._death()) from None

    def _death(self) -> tuple[RunState, str]:
        message = self._death_message()
        code = self.box.exit_code()
        return (
            death_state(-code) if code is not None and code < 0 else RunState.runtime_error
        ), message

    def _death_message(self) -> str:
        if not self._wait_exit(2.0):
            self.kill()
            return "the worker process stopped answering and was killed"
        self.kill()  # reaps it, and ends anything it started
        code = self.box.exit_code()
        if self.closing:
            return "the worker pool was shut down during the job"
        if self.box.ran_out_of_memory() and self.limits.memory_bytes is not None:
            return f"used more than {describe_bytes(self.limits.memory_bytes)} of host memory"
        if code is None:
            return "the worker process ended without a status"
        if code >= 0:
            return f"the worker process exited with status {code} before it sent a result"
        return signal_message(-code, self.limits)

    def _parse_result(self, job: RunJob, raw: Any) -> RunResult:
        try:
            result = RunResult.model_validate(raw)
        except ValidationError as exc:
            # The child validates its result before sending it: this one is not its own.
            self._reject(f"an unreadable result ({exc.error_count()} errors)")
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
            self._chan.send(message)
        except (OSError, ValueError):
            raise _Stop(*self._death()) from None

    def _deliver(self, on_event: EventCallback | None, raw: Any, job: RunJob) -> None:
        try:
            event = ProgressEvent.model_validate(raw)
        except ValidationError as exc:
            # The child validates its events before sending them: this one is not its own.
            self._reject(f"an unreadable event ({exc.error_count()} errors)")
        if event.state in PHASE_WORDS:
            self._phase = event.state
        if on_event is None:
            return
        try:
            on_event(event.model_copy(update={"job_id": job.job_id}))
        except Exception:  # noqa: BLE001 - a listener's failure must not fail the job
            log.exception("progress listener failed for job %s", job.job_id)

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
        """Kill every process of the child (its sandbox, or its process group), then reap it."""
        self.healthy = False
        if self.learner is not None:
            self.learner.end()
        self.box.kill()
        try:
            self.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            log.error("evaluation child %s did not die after SIGKILL", self.pid)

    def stop(self) -> None:
        """Ask an idle child to leave, kill it if it does not, and remove its directory."""
        if not self.exited():
            with contextlib.suppress(OSError, ValueError):
                self._chan.send({"type": "stop"}, timeout_s=1.0)
            self._wait_exit(2.0)
        self.kill()  # also takes down anything it left behind in its group
        self.box.close()
        self._chan.close()
        if self._carrier is not None:
            self._carrier.close()
        shutil.rmtree(self.home, ignore_errors=True)


def _socket_pair() -> tuple[Channel, socket.socket]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    theirs.set_inheritable(True)
    return Channel(ours, _MAX_MESSAGE_BYTES), theirs
