"""The learner's box beside an evaluation child: started ahead, handed over, ended after use.

An evaluation child (`workers/child.py`) never runs learner code; each job's learner code
runs in a box of its own (`kplay.workers.boxmain`, which serves `kernels.learnerbox`),
sandboxed like the child and under the same limits. The parent starts the box before the
job arrives, so its imports are done by then; gives the child the box's end of a socket
pair (SCM_RIGHTS over a socket kept for that); and ends the box once a job has used it,
with everything it started, and starts the next. A box that no learner code reached (a
GPU kernel the child had already loaded) serves the next job too.

A numba-cpu box that ran learner code serves one more kind of job: a run of the same
learner, of the same source (`reuse_key`), after a run that ended `done` or `wrong`, in
a box still alive that wrote nothing out of turn. Nothing of another learner ever
reaches it, and the code in it is the code that job would load anyway, so what it left
behind is that code's own doing; the run's inputs come from new secret seeds as always.
The evaluator calls the function the box compiled for the last run (kernels.compiling),
so a re-run pays neither a box's start (imports, 1-3 s on a small host) nor Numba's
compile. A box ends after `MAX_RUNS` runs, or once its processes have used `CPU_SHARE`
of the CPU budget, since the budget (RLIMIT_CPU) counts its whole life. Between runs a
kept box is swept and frozen: every process its runs started is killed (as the
evaluation child's are), and its own process is stopped (SIGSTOP) until its next run,
so nothing of it runs while other learners' kernels are timed.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kplay.kernels.models import RunJob, RunResult, RunState
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


# A box serves this many runs at most; it ends once its processes used this share of the
# per-job CPU budget (Limits.cpu_seconds), so a kept box always has most of it left.
MAX_RUNS = 100
CPU_SHARE = 0.25
# The verdicts after which a box may serve the same learner's same source again.
_REUSABLE = frozenset({RunState.done, RunState.wrong})


# The backends whose boxes may be kept: host kernels timed on this machine's CPUs.
REUSED_BACKENDS = frozenset({"numba-cpu"})


def reuse_key(job: RunJob) -> tuple[str, str, str] | None:
    """What a kept box must have run before to serve `job`: its learner, backend and
    source; None for a job that needs a fresh box (no learner named, another backend, a
    profile)."""
    if not job.user or job.backend not in REUSED_BACKENDS or job.mode not in ("full", "check"):
        return None
    return (job.user, job.backend, hashlib.sha256(job.source.encode()).hexdigest())


def times_on_host(job: RunJob) -> bool:
    """Whether the job times a kernel on this host's CPUs (numba-cpu, a full run)."""
    return job.backend == "numba-cpu" and job.mode == "full"


def start_ahead(job: RunJob) -> bool:
    """Whether the next box may warm up while `job` runs: not beside a timed host kernel,
    and not on a small host (under 8 CPUs), where its imports slow the job itself."""
    return not times_on_host(job) and (os.cpu_count() or 1) >= 8


@dataclass
class _Started:
    """One started box, seen from the parent."""

    box: Box
    home: Path
    unsent: socket.socket | None  # the evaluator's end, until it is handed over
    ready: int | None  # the box writes one byte here once its imports are done
    key: tuple[str, str, str] | None = None  # the runs it may serve, once learner code ran
    runs: int = 0
    frozen: list[int] = field(default_factory=list)  # stopped between runs

    def alive(self) -> bool:
        return self.box.proc.poll() is None

    def freeze(self) -> None:
        """Stop the box's processes, bubblewrap's init apart, until `thaw`."""
        self.frozen = [s.pid for s in self.box.members(fresh=True) if s.pid != self.box.init_pid]
        self._signal(self.frozen, signal.SIGSTOP)

    def thaw(self) -> None:
        self._signal(self.frozen, signal.SIGCONT)
        self.frozen = []

    @staticmethod
    def _signal(pids: list[int], signum: int) -> None:
        for pid in pids:  # a stopped process cannot exit: the pids are still theirs
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)

    def end(self) -> None:
        if self.unsent is not None:
            self.unsent.close()
            self.unsent = None
        if self.ready is not None:
            os.close(self.ready)
            self.ready = None
        self.box.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.box.proc.wait(timeout=5.0)
        self.box.close()
        shutil.rmtree(self.home, ignore_errors=True)


class LearnerSlot:
    """The learner boxes that belong to one evaluation child.

    `current` is the box whose socket the child holds; `waiting` one started and not yet
    handed over. The next box starts as soon as a job takes one, so back-to-back jobs do
    not wait for its imports, except while a host kernel is timed (`times_on_host`): its
    imports would share the CPUs with the kernel, so it starts after that job.
    """

    def __init__(
        self, limits: Limits, cache_dir: Path, sandbox: Sandbox | None, output: Path
    ) -> None:
        self.limits = limits
        self.cache_dir = cache_dir
        self.sandbox = sandbox
        self.output = output
        self.current: _Started | None = None
        self.waiting: _Started | None = None

    def start(self) -> None:
        """Have a box warming up (or warm) for the next job that needs a fresh one."""
        if self.waiting is None:
            self.waiting = self._launch()

    def _launch(self) -> _Started:
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
                box = start_process(
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
        return _Started(box, home, ours, ready_read)

    def _next(self, job: RunJob | None) -> _Started | None:
        """The box the next job will use: the child's own while it lives and may serve
        `job` (untouched by learner code, or kept for this run), else a fresh one."""
        current = self.current
        if current is not None and current.alive():
            if current.key is None or (job is not None and current.key == reuse_key(job)):
                return None
        self.start()
        return self.waiting

    def wait_ready(self, timeout_s: float, job: RunJob | None = None) -> None:
        """Wait until the next job's box has done its imports, so no job's clock counts them.

        Raises OSError when it does not get there (it died, or took too long).
        """
        started = self._next(job)
        if started is None or started.ready is None:
            return
        ready, started.ready = started.ready, None
        try:
            if not select.select([ready], [], [], timeout_s)[0]:
                raise OSError(f"the learner's box was not ready after {timeout_s:.0f} s")
            if os.read(ready, 1) != b"R":
                raise OSError("the learner's box did not start")
        finally:
            os.close(ready)

    def hand_over(
        self, carrier: socket.socket, ahead: bool = True, job: RunJob | None = None
    ) -> bool:
        """Send a fresh box's end to the child; False when the child keeps the one it has.

        With `ahead`, the next box starts at once (see the class).
        """
        started = self._next(job)
        if started is None:
            if self.current is not None and self.current.key is not None:
                self.current.thaw()  # kept for this run: it runs again
            return False
        if job is not None and reuse_key(job) is not None:
            started.box.begin_job(None)  # its processes before learner code: never swept
        if self.current is not None:
            self.current.end()
        self.current, self.waiting = started, None
        assert started.unsent is not None
        socket.send_fds(carrier, [b"B"], [started.unsent.fileno()])
        started.unsent.close()
        started.unsent = None
        if ahead:
            self.start()
        return True

    def after_job(
        self, result: RunResult, used: bool, job: RunJob | None = None, kept: bool = False
    ) -> RunResult:
        """A box that ran learner code serves no other job but the same learner's same
        source (`kept`: the child can go on with it); else end it, have the next ready.

        A job that lost its box learns here how the box ended, which only this side sees.
        """
        if result.state is RunState.runtime_error and BOX_GONE in (result.message or ""):
            said = self.death_message()
            if said is not None:
                result = result.model_copy(update={"message": said})
        current = self.current
        if used and current is not None:
            key = reuse_key(job) if job is not None and kept else None
            if key is not None and result.state in _REUSABLE and self._may_serve(current, key):
                current.key, current.runs = key, current.runs + 1
                current.box.sweep()
                current.freeze()
            else:
                current.end()
                self.current = None
        if self.current is None or self.current.key is not None:
            self.start()
        return result

    def _may_serve(self, started: _Started, key: tuple[str, str, str]) -> bool:
        """Whether a box that ran learner code may serve another run of `key`."""
        if not started.alive() or started.runs + 1 >= MAX_RUNS:
            return False
        if started.key is not None and started.key != key:
            return False  # cannot happen: a kept box serves its own key only
        budget = self.limits.cpu_seconds
        return budget is None or started.box.usage().cpu_s < CPU_SHARE * budget

    def death_message(self) -> str | None:
        """How the child's box ended, in words, when it ended on its own (a crash, an exit)."""
        if self.current is None:
            return None
        box = self.current.box
        try:
            box.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return None
        code = box.exit_code()
        if code is None:
            return None
        if code < 0:
            return signal_message(-code, self.limits)
        return f"the learner's code ended its process with status {code}"

    def end(self) -> None:
        for started in (self.current, self.waiting):
            if started is not None:
                started.end()
        self.current = self.waiting = None
