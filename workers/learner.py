"""The learner's box beside an evaluation child: started ahead, handed over, ended after use.

An evaluation child (`workers/child.py`) never runs learner code; each job's learner code
runs in a box of its own (`kplay.workers.boxmain`, which serves `kernels.learnerbox`),
sandboxed like the child and under the same limits. The parent starts the box before the
job arrives, so its imports are done by then; gives the child the box's end of a socket
pair (SCM_RIGHTS over a socket kept for that); and ends the box once a job has used it,
with everything it started, and starts the next. A box that no learner code reached (a
GPU kernel the child had already loaded) serves the next job too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from kplay.kernels.models import RunResult, RunState
from kplay.kernels.remote import BOX_GONE
from kplay.workers.box import Box
from kplay.workers.limits import Limits, child_env, signal_message
from kplay.workers.sandbox import Sandbox

log = logging.getLogger(__name__)


def start_process(
    command: list[str],
    home: Path,
    out: Any,
    fds: tuple[int, ...],
    limits: Limits,
    cache_dir: Path,
    sandbox: Sandbox | None,
    gpu: bool = True,
    box: bool = False,
) -> Box:
    """Start `command` in `sandbox`, or as a plain process leading its own session.

    Without `gpu` the sandbox holds no NVIDIA device file. A learner's `box` compiles
    for the host's GPU where it has one (`_box_env`).
    """
    env = sandbox.child_env(limits) if sandbox is not None else child_env(limits, home, cache_dir)
    if box:
        env = {**env, **_box_env()}
    if sandbox is not None:
        return sandbox.start(command, env=env, output=out, cwd=home, pass_fds=fds, gpu=gpu)
    proc = subprocess.Popen(
        command,
        cwd=home,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=out,
        pass_fds=fds,
        start_new_session=True,
    )
    return Box(proc)


def _box_env() -> dict[str, str]:
    """Numba's simulator and Triton's interpreter in a box only where the host has no GPU.

    On a GPU host the box compiles for the evaluator's device: numba-cuda initialises the
    driver while it compiles (a kernel with a shared array fails with "no device" in a
    process that sees none), so the box is given the same GPU as the evaluator. It only
    compiles there; the evaluator loads and launches what it built.
    """
    from kplay.kernels.hardware import has_cuda_gpu

    flag = "0" if has_cuda_gpu() else "1"
    return {"NUMBA_ENABLE_CUDASIM": flag, "TRITON_INTERPRET": flag}


class LearnerSlot:
    """The one learner box that belongs to one evaluation child."""

    def __init__(
        self, limits: Limits, cache_dir: Path, sandbox: Sandbox | None, output: Path
    ) -> None:
        self.limits = limits
        self.cache_dir = cache_dir
        self.sandbox = sandbox
        self.output = output
        self.box: Box | None = None
        self.home: Path | None = None
        self._unsent: socket.socket | None = None  # the evaluator's end, not yet handed over
        self._ready: int | None = None  # the box writes one byte here once it is warm
        self.started = 0

    def start(self) -> None:
        """Start the next box now, so that it warms up while the child waits for a job."""
        self.end()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        theirs.set_inheritable(True)
        ready_read, ready_write = os.pipe()
        home = Path(tempfile.mkdtemp(prefix="kplay-box-"))
        argv = [
            sys.executable, "-P", "-s", "-m", "kplay.workers.boxmain",
            str(theirs.fileno()), self.limits.model_dump_json(), str(ready_write),
        ]  # fmt: skip
        try:
            with open(self.output, "ab") as out:
                fds = (theirs.fileno(), ready_write)
                self.box = start_process(
                    argv, home, out, fds, self.limits, self.cache_dir, self.sandbox, box=True
                )
        except BaseException:
            ours.close()
            os.close(ready_read)
            shutil.rmtree(home, ignore_errors=True)
            raise
        finally:
            theirs.close()
            os.close(ready_write)
        self.home = home
        self._unsent = ours
        self._ready = ready_read
        self.started += 1

    def wait_ready(self, timeout_s: float) -> None:
        """Wait until the box's imports are done, so that no job's clock counts them.

        Raises OSError when it does not get there (it died, or took too long).
        """
        if self._ready is None:
            return
        try:
            if not select.select([self._ready], [], [], timeout_s)[0]:
                raise OSError(f"the learner's box was not ready after {timeout_s:.0f} s")
            if os.read(self._ready, 1) != b"R":
                raise OSError(f"the learner's box did not start: {self.death_message()}")
        finally:
            os.close(self._ready)
            self._ready = None

    def hand_over(self, carrier: socket.socket) -> bool:
        """Send a fresh box's end to the child; False when the child keeps the one it has."""
        if self._unsent is None:
            if self.box is not None and self.box.proc.poll() is None:
                return False
            self.start()
        assert self._unsent is not None
        socket.send_fds(carrier, [b"B"], [self._unsent.fileno()])
        self._unsent.close()
        self._unsent = None
        return True

    def after_job(self, result: RunResult, used: bool) -> RunResult:
        """A box that ran learner code serves no other job: end it, start the next.

        A job that lost its box learns here how the box ended, which only this side sees.
        """
        if result.state is RunState.runtime_error and BOX_GONE in (result.message or ""):
            said = self.death_message()
            if said is not None:
                result = result.model_copy(update={"message": said})
        if used or self.box is None:
            self.start()
        return result

    def death_message(self) -> str | None:
        """How the box ended, in words, when it ended on its own (a crash, an exit)."""
        if self.box is None:
            return None
        try:
            self.box.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return None
        code = self.box.exit_code()
        if code is None:
            return None
        if code < 0:
            return signal_message(-code, self.limits)
        return f"the learner's code ended its process with status {code}"

    def end(self) -> None:
        if self._unsent is not None:
            self._unsent.close()
            self._unsent = None
        if self._ready is not None:
            os.close(self._ready)
            self._ready = None
        if self.box is not None:
            self.box.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.box.proc.wait(timeout=5.0)
            self.box.close()
            self.box = None
        if self.home is not None:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None
