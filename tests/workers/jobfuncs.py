"""Small stand-ins for kernels.evaluate, run inside evaluation children by the runner tests.

Each is named by a dotted path such as "tests.workers.jobfuncs:hang". The module's
`warm_up` and `context_poisoned` play the engine's hooks of the same names.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import sys
import time
from collections.abc import Callable

from kplay.kernels.models import ProgressEvent, RunJob, RunResult, RunState

Emit = Callable[[ProgressEvent], None]

_warmed = False
_poisoned = False
# Which process answered: in a sandbox every evaluator is pid 2 of its own namespace, so
# the pid alone cannot tell two children apart.
ME = f"{os.getpid()}.{secrets.token_hex(4)}"


def warm_up() -> None:
    global _warmed
    # A slow warm-up, as the engine's imports and CUDA context are, when a test asks.
    time.sleep(float(os.environ.get("KPLAY_ENGINE_TEST_WARMUP_S", "0")))
    _warmed = True


def context_poisoned() -> bool:
    return _poisoned


def _result(job: RunJob, state: RunState = RunState.done, message: str | None = None) -> RunResult:
    return RunResult(
        job_id=job.job_id, problem=job.problem, backend=job.backend, state=state, message=message
    )


def ok(job: RunJob, emit: Emit) -> RunResult:
    """Passes; the job's `source` chooses a behaviour so one pool can mix good and bad jobs."""
    behaviour = BEHAVIOURS.get(job.source)
    if behaviour is not None:
        return behaviour(job, emit)
    if job.source.startswith("rendezvous:"):
        return rendezvous(job, emit)
    if job.source.startswith("gate:"):
        return gate(job, emit)
    print(f"ok {job.job_id}", flush=True)
    return _result(job, message=f"pid={ME} warmed={_warmed}")


def hang(job: RunJob, emit: Emit) -> RunResult:
    print("about to hang", flush=True)
    while True:
        time.sleep(0.05)


def segfault(job: RunJob, emit: Emit) -> RunResult:
    ctypes.string_at(0)  # reads address 0
    return _result(job)


def memory_hog(job: RunJob, emit: Emit) -> RunResult:
    hoard = []
    while True:
        block = bytearray(32 * 1024 * 1024)
        block[::4096] = b"x" * len(block[::4096])  # touch every page so it is resident
        hoard.append(block)


def huge_allocation(job: RunJob, emit: Emit) -> RunResult:
    block = bytearray(64 * 1024 * 1024 * 1024)
    return _result(job, message=str(len(block)))


def flood(job: RunJob, emit: Emit) -> RunResult:
    line = b"y" * 1023 + b"\n"
    while True:
        os.write(1, line)  # at the fd level, as C code would


def c_printf(job: RunJob, emit: Emit) -> RunResult:
    libc = ctypes.CDLL(None)
    libc.printf(b"from C printf %d\n", ctypes.c_int(42))
    sys.stderr.write("from Python stderr\n")
    return _result(job)


def progress(job: RunJob, emit: Emit) -> RunResult:
    for state in (RunState.compiling, RunState.checking, RunState.timing):
        emit(ProgressEvent(job_id=job.job_id, state=state, detail=f"stage {state.value}"))
        time.sleep(0.05)
    return _result(job)


def environment(job: RunJob, emit: Emit) -> RunResult:
    import json

    seen = {"env": dict(os.environ), "cwd": os.getcwd()}
    return _result(job, message=json.dumps(seen))


def rlimits(job: RunJob, emit: Emit) -> RunResult:
    import json
    import resource

    names = {"as": resource.RLIMIT_AS, "core": resource.RLIMIT_CORE, "fsize": resource.RLIMIT_FSIZE}
    soft = {key: resource.getrlimit(which)[0] for key, which in names.items()}
    return _result(job, message=json.dumps(soft))


def burn_cpu(job: RunJob, emit: Emit) -> RunResult:
    x = 0
    while True:
        x += 1


def poison(job: RunJob, emit: Emit) -> RunResult:
    global _poisoned
    _poisoned = True
    return _result(job, RunState.runtime_error, message=f"context poisoned in {ME}")


def exits(job: RunJob, emit: Emit) -> RunResult:
    os._exit(3)


def raises(job: RunJob, emit: Emit) -> RunResult:
    raise RuntimeError("engine bug")


def sleep_briefly(job: RunJob, emit: Emit) -> RunResult:
    time.sleep(0.5)
    return _result(job, message=f"pid={ME}")


def announce_then_hang(job: RunJob, emit: Emit) -> RunResult:
    emit(ProgressEvent(job_id=job.job_id, state=RunState.compiling))
    return hang(job, emit)


def hang_while_checking(job: RunJob, emit: Emit) -> RunResult:
    """Compiles, starts the check, and never finishes it (an endless loop in a kernel)."""
    for state in (RunState.compiling, RunState.checking):
        emit(ProgressEvent(job_id=job.job_id, state=state))
    return hang(job, emit)


def rendezvous(job: RunJob, emit: Emit) -> RunResult:
    """Source "rendezvous:DIR:NAME": leave a mark in DIR, wait for the other job's mark."""
    _, folder, name = job.source.split(":")
    with open(os.path.join(folder, name), "w"):
        pass
    for _ in range(200):
        if len(os.listdir(folder)) >= 2:
            return _result(job, message=f"pid={ME}")
        time.sleep(0.01)
    return _result(job, RunState.wrong, message="the other job never started")


def gate(job: RunJob, emit: Emit) -> RunResult:
    """Source "gate:PATH": say it started, then wait until PATH exists (at most 30 s)."""
    path = job.source.split(":", 1)[1]
    emit(ProgressEvent(job_id=job.job_id, state=RunState.compiling, detail="waiting at the gate"))
    for _ in range(3000):
        if os.path.exists(path):
            return _result(job, message=f"pid={ME}")
        time.sleep(0.01)
    return _result(job, RunState.wrong, message="the gate never opened")


BEHAVIOURS: dict[str, Callable[[RunJob, Emit], RunResult]] = {
    "hang": hang,
    "segfault": segfault,
    "poison": poison,
    "sleep": sleep_briefly,
    "exit": exits,
    "announce-hang": announce_then_hang,
    "hang-checking": hang_while_checking,
}
