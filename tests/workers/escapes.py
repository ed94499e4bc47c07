"""Evaluation targets that try to get out of the sandbox, as learner code would.

`probe` runs inside an evaluation child; the job's source names the attempt and its
argument ("connect:127.0.0.1:6379", "read:/proc/1/environ", ...). Every attempt reports
what happened as JSON in the result's message, so the test on the host side judges it.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from kplay.kernels.models import ProgressEvent, RunJob, RunResult, RunState

Emit = Callable[[ProgressEvent], None]
Seen = dict[str, Any]


def probe(job: RunJob, emit: Emit) -> RunResult:
    name, _, arg = job.source.partition(":")
    seen = ATTEMPTS[name](arg)
    return RunResult(
        job_id=job.job_id,
        problem=job.problem,
        backend=job.backend,
        state=RunState.done,
        message=json.dumps(seen),
    )


def _failure(exc: BaseException) -> Seen:
    return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


def connect(arg: str) -> Seen:
    host, _, port = arg.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2.0):
            return {"ok": True}
    except OSError as exc:
        return _failure(exc)


def read(path: str) -> Seen:
    try:
        with open(path, "rb") as f:
            return {"ok": True, "bytes": len(f.read(4096))}
    except OSError as exc:
        return _failure(exc)


def listdir(path: str) -> Seen:
    try:
        return {"ok": True, "entries": sorted(os.listdir(path))}
    except OSError as exc:
        return _failure(exc)


def write(path: str) -> Seen:
    try:
        with open(path, "w") as f:
            f.write("written from inside\n")
        return {"ok": True}
    except OSError as exc:
        return _failure(exc)


def processes(_: str) -> Seen:
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    found[name] = f.read().replace(b"\0", b" ").decode(errors="replace")[:80]
            except OSError:
                found[name] = ""
    return {"ok": True, "processes": found}


def raise_hard(_: str) -> Seen:
    """Try to lift each hard limit above itself."""
    tried = {}
    for key in ("NOFILE", "FSIZE", "CORE", "CPU", "NPROC", "AS"):
        which = getattr(resource, f"RLIMIT_{key}")
        soft, hard = resource.getrlimit(which)
        if hard == resource.RLIM_INFINITY:
            tried[key] = "unlimited"
            continue
        try:
            resource.setrlimit(which, (soft, hard + 1024))
            tried[key] = "raised"
        except (ValueError, OSError):
            tried[key] = "refused"
    return {"ok": True, "tried": tried}


def raise_soft_cpu(_: str) -> Seen:
    """Lift the CPU budget's soft limit as far as the hard one allows."""
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))
    return {"ok": True, "soft": resource.getrlimit(resource.RLIMIT_CPU)[0], "hard": hard}


def cpu_budget(_: str) -> Seen:
    """What this job may still spend before RLIMIT_CPU stops it."""
    soft, _ = resource.getrlimit(resource.RLIMIT_CPU)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"ok": True, "soft": soft, "used": usage.ru_utime + usage.ru_stime}


def niceness(_: str) -> Seen:
    """The scheduling niceness this job runs at."""
    return {"ok": True, "nice": os.getpriority(os.PRIO_PROCESS, 0)}


def renice_down(_: str) -> Seen:
    """Take back the niceness the job was given, to win the CPU from the web server."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 0)
    except OSError as exc:
        return {**_failure(exc), "nice": os.getpriority(os.PRIO_PROCESS, 0)}
    return {"ok": True, "nice": os.getpriority(os.PRIO_PROCESS, 0)}


def burn_in_children(arg: str) -> Seen:
    """Raise the soft CPU limit, then burn CPU in subprocesses, where RLIMIT_CPU counts
    each process apart: only the parent's measure of the whole box can stop it."""
    raise_soft_cpu("")
    burn = "while True: pass"
    workers = [subprocess.Popen([sys.executable, "-c", burn]) for _ in range(int(arg or 2))]
    for worker in workers:
        worker.wait()
    return {"ok": False, "error": "the burners ended by themselves"}


def background(mark: str) -> Seen:
    """Leave a sleeper behind, in a new session, as a daemon would."""
    subprocess.Popen(["sleep", mark], start_new_session=True)
    subprocess.Popen(["sh", "-c", f"sleep {mark} & exit 0"])  # orphaned at once
    return {"ok": True}


def compile_and_hang(mark: str) -> Seen:
    """Start a long child process, as a compiler would, and never finish."""
    subprocess.Popen(["sleep", mark])
    while True:
        time.sleep(0.1)


_PTRACE_TRACEME = 0
_CLONE_NEWUSER = 0x10000000
_ADDR_NO_RANDOMIZE = 0x0040000


def syscalls(_: str) -> Seen:
    """Calls the filter denies, and the socket calls it must leave alone."""
    libc = ctypes.CDLL(None, use_errno=True)

    def call(fn: Callable[[], int]) -> str:
        ctypes.set_errno(0)
        result = fn()
        return "allowed" if result != -1 else errno.errorcode.get(ctypes.get_errno(), "?")

    seen = {
        "ptrace": call(lambda: libc.ptrace(_PTRACE_TRACEME, 0, None, None)),
        "unshare": call(lambda: libc.unshare(_CLONE_NEWUSER)),
        "personality": call(lambda: libc.personality(_ADDR_NO_RANDOMIZE)),
        "keyctl": call(lambda: libc.syscall(250, 0, 0, 0, 0, 0)),  # keyctl on x86-64
    }
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.sendall(b"ping")
    seen["socketpair"] = "allowed" if b.recv(4) == b"ping" else "broken"
    a.close()
    b.close()
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    seen["socket"] = "allowed"
    tcp.close()
    return {"ok": True, "calls": seen}


def identity(_: str) -> Seen:
    import pwd

    return {
        "ok": True,
        "uid": os.getuid(),
        "gid": os.getgid(),
        "users": [p.pw_name for p in pwd.getpwall()],
        "hostname": socket.gethostname(),
    }


ATTEMPTS: dict[str, Callable[[str], Seen]] = {
    "connect": connect,
    "read": read,
    "listdir": listdir,
    "write": write,
    "processes": processes,
    "raise-hard": raise_hard,
    "raise-soft-cpu": raise_soft_cpu,
    "cpu-budget": cpu_budget,
    "burn-in-children": burn_in_children,
    "niceness": niceness,
    "renice-down": renice_down,
    "background": background,
    "compile-and-hang": compile_and_hang,
    "syscalls": syscalls,
    "identity": identity,
}
