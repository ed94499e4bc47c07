"""A started evaluation child and every process that belongs to it: the parent's view.

Two kinds, one interface. A plain child is a process group led by the evaluator; its
processes are the evaluator's descendants. A sandboxed child is bubblewrap: the process
the parent started (bubblewrap outside), bubblewrap's init as pid 1 of a new pid
namespace, the evaluator as pid 2 and whatever those start; its processes are those of
that namespace (or of its cgroup, where there is one). Killing the init ends the
namespace, and the kernel then kills everything in it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time

from kplay.workers import proctree
from kplay.workers.proctree import ProcStat, Usage
from kplay.workers.sandbox_cgroup import BoxCgroup

log = logging.getLogger(__name__)

# How often the list of a box's processes is read again (a scan of /proc); in between,
# only the known processes' own counters are read.
_REFRESH_S = 0.25
# A sweep kills, looks again, and repeats while it keeps finding processes (a fork loop
# can start new ones between a look and the kill).
_SWEEP_ROUNDS = 20


class Box:
    """The processes of one evaluation child, seen and ended from outside."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        *,
        namespace: str | None = None,
        init_pid: int | None = None,
        cgroup: BoxCgroup | None = None,
    ) -> None:
        self.proc = proc
        self.namespace = namespace  # sandboxed: "pid:[inode]" of the box's pid namespace
        self.cgroup = cgroup
        self._init_fd: int | None = None
        if init_pid is not None:
            with contextlib.suppress(OSError):
                self._init_fd = os.pidfd_open(init_pid)
        self.init_pid = init_pid
        # Processes that were there before the first job (the evaluator, the init): a
        # sweep never touches them. Set at the first job's start.
        self._residents: set[tuple[int, int]] | None = None
        self._members: list[ProcStat] = []
        self._members_at = 0.0

    @property
    def sandboxed(self) -> bool:
        return self.namespace is not None

    @property
    def pid(self) -> int:
        return self.proc.pid

    # ------------------------------------------------------------ looking

    def members(self, fresh: bool = False) -> list[ProcStat]:
        now = time.monotonic()
        if fresh or now - self._members_at >= _REFRESH_S:
            self._members = self._scan()
            self._members_at = now
        return self._members

    def _scan(self) -> list[ProcStat]:
        if self.cgroup is not None:
            stats = [proctree.read_stat(pid) for pid in self.cgroup.pids()]
            return [s for s in stats if s is not None and s.pid != self.pid]
        if self.namespace is not None:
            return proctree.in_namespace(self.namespace)
        return proctree.descendants(self.pid)

    def usage(self) -> Usage:
        """CPU time and resident memory of every process of the box, read now."""
        found = proctree.usage(self.members())
        if self.cgroup is not None:
            charged = self.cgroup.memory_bytes()
            if charged is not None:  # page cache and tmpfs files count there too
                return Usage(found.cpu_s, max(found.rss_bytes, charged))
        return found

    def begin_job(self, memory_allowance: int | None) -> Usage:
        """Called as a job starts: what the box uses now, the job's zero point."""
        members = self.members(fresh=True)
        if self._residents is None:
            self._residents = {(s.pid, s.start) for s in members}
        if self.cgroup is not None and memory_allowance is not None:
            self.cgroup.limit_memory(memory_allowance)
        return proctree.usage(members) if self.cgroup is None else self.usage()

    def ran_out_of_memory(self) -> bool:
        """Whether the kernel's OOM killer acted inside the box's cgroup."""
        return self.cgroup is not None and self.cgroup.oom_kills() > 0

    # ------------------------------------------------------------ ending

    def sweep(self) -> int:
        """Kill every process a job left in the box, leaving the evaluator; how many."""
        if self._residents is None:
            return 0
        killed = 0
        for _ in range(_SWEEP_ROUNDS):
            members = self.members(fresh=True)
            strays = [s for s in members if (s.pid, s.start) not in self._residents]
            if not strays:
                break
            killed += proctree.kill_all(strays)
        if killed:
            log.info("evaluation child %s: killed %d process(es) its job left", self.pid, killed)
        return killed

    def kill(self) -> None:
        """End the whole box: every process in it, then bubblewrap or the group leader."""
        if self.cgroup is not None:
            self.cgroup.kill()
        if self._init_fd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self._init_fd, signal.SIGKILL)
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)

    def exit_code(self) -> int | None:
        """The evaluator's exit status as subprocess reports it (negative: a signal).

        Bubblewrap passes on a command killed by signal N as status 128 + N.
        """
        code = self.proc.returncode
        if code is not None and self.sandboxed and code > 128:
            return -(code - 128)
        return code

    def close(self) -> None:
        """After the box ended: release the init's pidfd and remove the cgroup."""
        if self._init_fd is not None:
            os.close(self._init_fd)
            self._init_fd = None
        if self.cgroup is not None:
            self.cgroup.remove()
