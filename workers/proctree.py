"""The processes of one evaluation child as its parent sees them through /proc.

A child is never just one process: compilers, a learner's `subprocess` calls and, in the
sandbox, bubblewrap's own init all belong to it. The parent measures them together (CPU
time, resident memory) and kills every one of them but the evaluator itself after a job.
Processes are named by (pid, start time), so a pid the kernel hands to a stranger after
one of ours ended is never taken for ours.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Usage:
    """CPU seconds (user + system, finished subprocesses included) and resident bytes."""

    cpu_s: float = 0.0
    rss_bytes: int = 0

    def __sub__(self, other: Usage) -> Usage:
        return Usage(self.cpu_s - other.cpu_s, self.rss_bytes - other.rss_bytes)


@dataclass(frozen=True)
class ProcStat:
    pid: int
    ppid: int
    start: int  # clock ticks after boot: with the pid, names one process for good
    cpu_s: float  # its own time and that of the children it has reaped


def read_stat(pid: int) -> ProcStat | None:
    """/proc/<pid>/stat, or None when the process is gone or not ours to read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name is in parentheses and may itself hold spaces and parentheses.
    fields = data[data.rindex(b")") + 2 :].split()
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    return ProcStat(pid, int(fields[1]), int(fields[19]), ticks / CLOCK_TICKS)


def rss_bytes(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * PAGE_BYTES
    except (OSError, IndexError, ValueError):
        return None


def all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def pid_namespace(pid: int) -> str | None:
    """The pid namespace of `pid` as the kernel names it ("pid:[4026532178]")."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def descendants(root: int) -> list[ProcStat]:
    """`root` and every process below it, by parent pid (a full scan of /proc)."""
    stats = [s for s in map(read_stat, all_pids()) if s is not None]
    children: dict[int, list[ProcStat]] = {}
    for stat in stats:
        children.setdefault(stat.ppid, []).append(stat)
    found = [s for s in stats if s.pid == root]
    index = 0
    while index < len(found):
        found.extend(children.get(found[index].pid, []))
        index += 1
    return found


def in_namespace(namespace: str) -> list[ProcStat]:
    """Every process of one pid namespace (a full scan of /proc)."""
    found = []
    for pid in all_pids():
        if pid_namespace(pid) == namespace:
            stat = read_stat(pid)
            if stat is not None:
                found.append(stat)
    return found


def usage(stats: Iterable[ProcStat]) -> Usage:
    """The CPU time and resident memory of these processes, read now.

    Each process counts its own time plus that of the children it has reaped, so summing
    over the live ones counts every process of the tree once, finished ones included.
    """
    cpu = 0.0
    rss = 0
    for stat in stats:
        now = read_stat(stat.pid)
        if now is None or now.start != stat.start:
            continue
        cpu += now.cpu_s
        rss += rss_bytes(stat.pid) or 0
    return Usage(cpu, rss)


def kill_all(stats: Iterable[ProcStat], wait_s: float = 2.0) -> int:
    """SIGKILL each process that is still the one named (pid and start time) once a pidfd
    pins it, and wait up to `wait_s` for them to end. Returns how many were signalled."""
    pinned: list[int] = []
    for stat in stats:
        try:
            fd = os.pidfd_open(stat.pid)
        except OSError as exc:
            if exc.errno in (errno.ENOSYS, errno.EPERM):  # no pidfds here (gVisor, old kernels)
                _kill_if_same(stat)
            continue  # otherwise already gone
        now = read_stat(stat.pid)
        if now is None or now.start != stat.start:
            os.close(fd)
            continue
        try:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        except OSError:
            os.close(fd)
            continue
        pinned.append(fd)
    try:
        _wait_ended(pinned, wait_s)
    finally:
        for fd in pinned:
            os.close(fd)
    return len(pinned)


def _kill_if_same(stat: ProcStat) -> None:
    """Without a pidfd: check the start time, then signal by pid (a narrow race)."""
    now = read_stat(stat.pid)
    if now is not None and now.start == stat.start:
        with contextlib.suppress(OSError):
            os.kill(stat.pid, signal.SIGKILL)


def _wait_ended(pidfds: list[int], wait_s: float) -> None:
    # A pidfd reads as ready once its process has exited (a zombie counts).
    poller = select.poll()
    for fd in pidfds:
        poller.register(fd, select.POLLIN)
    left = set(pidfds)
    deadline = time.monotonic() + wait_s
    while left:
        remaining_ms = int((deadline - time.monotonic()) * 1000)
        if remaining_ms <= 0:
            return
        for fd, _ in poller.poll(remaining_ms):
            left.discard(fd)
            with contextlib.suppress(KeyError):
                poller.unregister(fd)
