"""cgroup v2 groups for sandboxes, where the host hands the worker a subtree of its own.

Each sandbox gets a group of its own under a delegated folder: `pids.max` caps its tasks
(threads count), `memory.max` is moved before each job to what the box holds plus the
job's allowance, and `memory.oom.group` makes the kernel's OOM killer take the whole box.
The parent kills a group at once through `cgroup.kill` and removes it afterwards.

The folder is `KPLAY_SANDBOX_CGROUP` or, unset, the worker's own cgroup; it must be
writable and offer the memory and pids controllers to its children. A cgroup that holds
processes cannot hand controllers down (cgroup v2's "no internal processes" rule), so the
worker's own group only works when the service manager put the worker in a leaf below a
delegated folder and that folder is named here.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import signal
import time
from pathlib import Path

CONTROLLERS = ("memory", "pids")
_counter = itertools.count()


class CgroupUnavailable(RuntimeError):
    pass


def cgroup2_mount(mountinfo: str | None = None) -> Path | None:
    """Where the unified (v2) hierarchy is mounted, or None."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return None
    for line in mountinfo.splitlines():
        before, _, after = line.partition(" - ")
        if after.split(" ", 1)[0] == "cgroup2":
            return Path(before.split()[4])
    return None


def own_cgroup(proc_cgroup: str | None = None) -> str | None:
    """This process's path in the v2 hierarchy ("0::/path" in /proc/self/cgroup)."""
    if proc_cgroup is None:
        try:
            proc_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError:
            return None
    for line in proc_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def find_base(configured: Path | None) -> Path:
    """The folder to make per-sandbox groups in; CgroupUnavailable says why there is none."""
    if configured is not None:
        base = configured
    else:
        mount, path = cgroup2_mount(), own_cgroup()
        if mount is None or path is None:
            raise CgroupUnavailable("no cgroup v2 hierarchy is mounted")
        base = mount / path.lstrip("/")
    if not (base / "cgroup.controllers").is_file():
        raise CgroupUnavailable(f"{base} is not a cgroup v2 folder")
    if not os.access(base, os.W_OK):
        raise CgroupUnavailable(f"{base} is not writable by the worker (no delegation)")
    offered = (base / "cgroup.controllers").read_text().split()
    missing = [c for c in CONTROLLERS if c not in offered]
    if missing:
        raise CgroupUnavailable(f"{base} offers no {' or '.join(missing)} controller")
    enabled = (base / "cgroup.subtree_control").read_text().split()
    wanted = [c for c in CONTROLLERS if c not in enabled]
    if wanted:
        try:
            (base / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
        except OSError as exc:
            why = "it holds processes" if exc.errno == errno.EBUSY else exc.strerror
            raise CgroupUnavailable(
                f"cannot hand the memory and pids controllers down in {base}: {why}; "
                "name a delegated folder in KPLAY_SANDBOX_CGROUP"
            ) from None
    return base


class BoxCgroup:
    """The group of one sandbox: created before it starts, removed after it ended."""

    def __init__(self, base: Path, max_tasks: int) -> None:
        self.path = base / f"kplay-box-{os.getpid()}-{next(_counter)}"
        self.path.mkdir()
        try:
            (self.path / "pids.max").write_text(str(max_tasks))
            with contextlib.suppress(FileNotFoundError):
                (self.path / "memory.oom.group").write_text("1")
            with contextlib.suppress(FileNotFoundError):
                (self.path / "memory.swap.max").write_text("0")
        except OSError:
            self.remove()
            raise

    @property
    def procs_file(self) -> Path:
        return self.path / "cgroup.procs"

    def pids(self) -> list[int]:
        try:
            return [int(line) for line in self.procs_file.read_text().split()]
        except OSError:
            return []

    def memory_bytes(self) -> int | None:
        try:
            return int((self.path / "memory.current").read_text())
        except (OSError, ValueError):
            return None

    def limit_memory(self, allowance: int) -> None:
        """Let the box hold `allowance` bytes more than it holds now."""
        current = self.memory_bytes()
        if current is not None:
            with contextlib.suppress(OSError):
                (self.path / "memory.max").write_text(str(current + allowance))

    def oom_kills(self) -> int:
        try:
            for line in (self.path / "memory.events").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def kill(self) -> None:
        try:
            (self.path / "cgroup.kill").write_text("1")
        except OSError:
            for pid in self.pids():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def remove(self, wait_s: float = 2.0) -> None:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() >= deadline:
                    return  # still busy; the next start of the worker's sandbox finds it
                self.kill()
                time.sleep(0.02)
