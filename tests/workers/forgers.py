"""Evaluation targets that attack their child's private channel, as learner code can.

Numba and Triton cells run in the evaluation child's interpreter, where the channel's fd
number is in sys.argv. Each target here writes on it what an attacker would; the job's
`source` picks the attack ("forgers.run" dispatches), and "honest" is a plain passing job
whose message ends with "honest". Sources with a path ("...:PATH") leave a mark at PATH
once the attack has been written, so a test knows when it is on the wire.
"""

from __future__ import annotations

import inspect
import json
import os
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from kplay.kernels.models import ProgressEvent, RunJob, RunResult, RunState

Emit = Callable[[ProgressEvent], None]


def channel_fd() -> int:
    """The fd of the channel, as learner code would find it: the number in sys.argv."""
    return next(int(arg) for arg in sys.argv[1:] if arg.isdigit())


def frame(body: bytes) -> bytes:
    return struct.pack("!i", len(body)) + body


def write(message: dict[str, Any] | bytes) -> None:
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    os.write(channel_fd(), frame(body))


def forged_result(job: RunJob, state: RunState, **extra: Any) -> dict[str, Any]:
    verdict = {
        "job_id": job.job_id,
        "problem": job.problem,
        "backend": job.backend,
        "state": state.value,
        "message": "forged",
    }
    return {"type": "result", "result": verdict, "exit": False, **extra}


def stolen_nonce() -> str:
    """The running job's nonce, read off the child's stack as learner code can."""
    frame_ = inspect.currentframe()
    while frame_ is not None:
        nonce = frame_.f_locals.get("nonce")
        if isinstance(nonce, str):
            return nonce
        frame_ = frame_.f_back
    raise LookupError("no nonce on the stack")


def _verdict(job: RunJob, state: RunState, message: str) -> RunResult:
    return RunResult(
        job_id=job.job_id, problem=job.problem, backend=job.backend, state=state, message=message
    )


def _later(mark: str, message: dict[str, Any]) -> None:
    """Write `message` once this job's result has gone out, then leave the mark."""

    def attack() -> None:
        time.sleep(0.3)  # the child sends its result the moment the target returns
        write(message)
        with open(mark, "w"):
            pass

    threading.Thread(target=attack, daemon=True).start()


def run(job: RunJob, emit: Emit) -> RunResult:
    kind, _, arg = job.source.partition(":")
    honest = _verdict(job, RunState.wrong, f"{os.getpid()} the honest verdict: wrong")
    if kind == "honest":
        return _verdict(job, RunState.done, f"{os.getpid()} honest")
    if kind == "forge-no-nonce":
        write(forged_result(job, RunState.done))
    elif kind == "forge-wrong-nonce":
        write(forged_result(job, RunState.done, nonce="0" * 32))
    elif kind == "forge-event-wrong-nonce":
        event = {"job_id": job.job_id, "state": "checking", "detail": "forged"}
        write({"type": "event", "nonce": "f" * 32, "event": event})
    elif kind == "unknown-type":
        write({"type": "verdict", "nonce": stolen_nonce(), "state": "done"})
    elif kind == "second-result":
        # The right nonce, stolen: this job's own verdict can be forged until learner code
        # leaves this process, but the real result then follows it on the channel.
        write(forged_result(job, RunState.done, nonce=stolen_nonce()))
    elif kind == "not-json":
        write(b"\xff{not json")
    elif kind == "huge-frame":
        os.write(channel_fd(), struct.pack("!i", 2**31 - 1))
    elif kind == "half-frame":
        os.write(channel_fd(), struct.pack("!i", 1 << 20) + b"{}")
    elif kind == "queue-after-result":
        # For the next job: a "wrong" verdict without a nonce, sent while no job runs.
        _later(arg, forged_result(job, RunState.wrong))
    elif kind == "queue-stolen-after-result":
        _later(arg, forged_result(job, RunState.wrong, nonce=stolen_nonce()))
    else:
        raise ValueError(f"no attack called {kind!r}")
    return honest
