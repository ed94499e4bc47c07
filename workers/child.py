"""The evaluation child's main loop: `python -m workers.child FD CONFIG_JSON`.

The parent (workers.runner) starts this with a scrubbed environment, its private
directory as cwd, stdout and stderr already pointing into a file there, and one end of
a socket pair as FD. Everything on that socket is JSON (never pickle: the parent must
not run code a child sends it).

child -> parent: {"type": "ready", "error": str|None, "machine": dict|None} once, after
                 warm-up ("machine" only when the config asks the child to describe it);
                 {"type": "event", "nonce": str, "event": ProgressEvent} while a job runs;
                 {"type": "result", "nonce": str, "result": RunResult, "exit": bool} once
                 per job, last.
parent -> child: {"type": "job", "job": RunJob, "nonce": str} or {"type": "stop"}.

The nonce is fresh for every job. The parent kills a child that sends anything else: a
message without the running job's nonce, a second result, a message of another type,
bytes that are not a message, or anything at all while no job runs. Learner code runs in
this process and can write on the socket; what it writes cannot pass for the verdict of
a later job.
"""

from __future__ import annotations

import ctypes
import faulthandler
import importlib
import json
import os
import shutil
import socket
import sys
import tempfile
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from kplay.workers.limits import (
    Limits,
    apply_static_limits,
    cap_address_space,
    describe_bytes,
    set_cpu_budget,
)

Target = Callable[..., Any]


class _Loaded:
    """The target function and the optional hooks of its module."""

    def __init__(self, dotted: str) -> None:
        self.error: str | None = None
        self.run: Target | None = None
        self.warm_up: Callable[[], None] | None = None
        self.poisoned: Callable[[], bool] | None = None
        try:
            module_name, _, func_name = dotted.partition(":")
            module = importlib.import_module(module_name)
            self.run = getattr(module, func_name or "evaluate")
        except Exception as exc:  # noqa: BLE001 - reported on every job instead
            traceback.print_exc()
            self.error = f"the worker could not load its evaluator {dotted!r}: {exc!r}"
            return
        self.warm_up = getattr(module, "warm_up", None)
        self.poisoned = getattr(module, "context_poisoned", None)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    conn = Connection(int(args[0]))
    config = json.loads(args[1])
    limits = Limits.model_validate(config["limits"])
    apply_static_limits(limits)
    _line_buffer_c_stdio()
    # A crash in compiled code then leaves the Python stack in the output tail.
    faulthandler.enable()

    loaded = _Loaded(config["target"])
    error = loaded.error or _warm(loaded, config.get("warm", True))
    # Describing imports every backend's libraries: like warm-up, before the cap, which
    # then counts what they map as already spent.
    machine = _describe_safely() if config.get("describe") else None
    cap_address_space(limits, _has_gpu())
    _send(conn, {"type": "ready", "error": error, "pid": os.getpid(), "machine": machine})

    home = Path.cwd()
    boxes = _Boxes(config.get("boxes_fd"))
    while True:
        try:
            message = json.loads(conn.recv_bytes())
        except (EOFError, OSError):
            # The parent went away (killed, perhaps) and cannot clean up after us.
            shutil.rmtree(home, ignore_errors=True)
            return
        nonce = message.get("nonce")
        if message.get("type") != "job" or not isinstance(nonce, str) or not nonce:
            return
        box = boxes.for_job(message.get("box"))
        payload, leave = _run_one(conn, loaded, message["job"], nonce, limits, home, box)
        used, kept = boxes.after_job()
        _flush_all()
        reply = {"type": "result", "nonce": nonce, "result": payload, "exit": leave}
        if message.get("box") is not None:
            reply["box_used"] = used
            reply["box_kept"] = kept
        _send(conn, reply)
        if leave:
            return


class _Boxes:
    """The learner's boxes the parent hands over, one socket each, on the carrier socket.

    The parent says for each job whether it runs in a new box or the one this process
    holds ("same"): a box no learner code reached, or one the same learner's run of the
    same source used (workers/learner.py). A box is let go only when the next one comes.
    One shared-memory arena serves every box (kernels.shm), its segments recycled after
    each job.
    """

    def __init__(self, fd: Any) -> None:
        self.carrier = socket.socket(fileno=int(fd)) if isinstance(fd, int) else None
        self.client: Any = None
        self.arena: Any = None

    def for_job(self, which: Any) -> Any:
        if self.carrier is None or which not in ("new", "same"):
            return None
        if which == "same" and self.client is None:
            raise RuntimeError("the parent named a box this process does not hold")
        if which == "same" and self.client.idle_bytes():
            # Written while no request was out: nothing it says can be matched to a request.
            raise RuntimeError("the learner's box wrote between jobs")
        if which == "new":
            from kplay.kernels.remote import BoxClient
            from kplay.kernels.shm import SharedArena

            if self.client is not None:
                self.client.close()
                self.client = None
            _, fds, _, _ = socket.recv_fds(self.carrier, 1, 1)
            if len(fds) != 1:
                raise RuntimeError("the parent sent no box with the job")
            if self.arena is None:
                self.arena = SharedArena()
            self.client = BoxClient.from_fd(fds[0], self.arena)
        return self.client

    def after_job(self) -> tuple[bool, bool]:
        """(learner code reached the box, this process can go on with it); the job's
        segments wait for the next job."""
        if self.arena is not None:
            self.arena.recycle()
        if self.client is None:
            return False, False
        used = bool(self.client.used)
        if self.client.idle_bytes():  # more than its answers: it serves no other job
            self.client.close()
            self.client = None
            return used, False
        return used, True


def _warm(loaded: _Loaded, warm: bool) -> str | None:
    if not warm or loaded.warm_up is None:
        return None
    try:
        loaded.warm_up()
    except Exception as exc:  # noqa: BLE001 - a warm-up failure is not fatal by itself
        traceback.print_exc()
        return f"warm-up failed: {exc!r}"
    return None


def _run_one(
    conn: Connection,
    loaded: _Loaded,
    raw_job: dict[str, Any],
    nonce: str,
    limits: Limits,
    home: Path,
    box: Any = None,
) -> tuple[dict[str, Any], bool]:
    """Run one job in a fresh working directory; returns (result JSON, child must exit)."""
    from kplay.kernels.models import ProgressEvent, RunJob, RunResult

    job = RunJob.model_validate(raw_job)
    workdir = Path(tempfile.mkdtemp(prefix="job-", dir=home))
    os.chdir(workdir)
    tempfile.tempdir = str(workdir)
    os.environ["TMPDIR"] = str(workdir)
    set_cpu_budget(limits)

    def emit(event: Any) -> None:
        # Checked here: the parent takes an event it cannot read for a forged one.
        checked = ProgressEvent.model_validate(_jsonable(event)).model_dump(mode="json")
        _flush_all()  # so what the kernel printed so far is on disk when the event arrives
        _send(conn, {"type": "event", "nonce": nonce, "event": checked})

    try:
        if loaded.run is None:
            raise _EngineUnavailable(loaded.error or "no evaluator")
        outcome = loaded.run(job, emit) if box is None else loaded.run(job, emit, box=box)
        result = RunResult.model_validate(_jsonable(outcome))
        payload = result.model_dump(mode="json")
    except MemoryError:
        _print_exc()
        payload = _failure(job, f"used more than {_memory_words(limits)} of host memory")
    except _EngineUnavailable as exc:
        payload = _failure(job, str(exc))
    except BaseException as exc:  # noqa: BLE001 - SystemExit from learner code included
        _print_exc()
        payload = _failure(job, f"the evaluation failed: {type(exc).__name__}: {exc}")
    finally:
        os.chdir(home)
        tempfile.tempdir = str(home)
        os.environ["TMPDIR"] = str(home)
        shutil.rmtree(workdir, ignore_errors=True)
    return payload, _is_poisoned(loaded)


class _EngineUnavailable(Exception):
    pass


def _failure(job: Any, message: str) -> dict[str, Any]:
    return {
        "job_id": job.job_id,
        "problem": job.problem,
        "backend": job.backend,
        "state": "runtime_error",
        "message": message,
    }


def _memory_words(limits: Limits) -> str:
    return describe_bytes(limits.memory_bytes) if limits.memory_bytes else "the allowed amount"


def _is_poisoned(loaded: _Loaded) -> bool:
    if loaded.poisoned is None:
        return False
    try:
        return bool(loaded.poisoned())
    except Exception:  # noqa: BLE001 - if we cannot tell, assume the worst
        return True


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


def _send(conn: Connection, message: dict[str, Any]) -> None:
    conn.send_bytes(json.dumps(message).encode())


def describe_machine() -> dict[str, Any]:
    """The device this child runs on and what each backend can do here.

    Asked of a child rather than the server process: the answer depends on the
    environment the child was given, and finding it out imports GPU libraries.
    """
    from kplay.kernels import hardware
    from kplay.kernels.backends import registry

    gpus = hardware.gpu_count()
    name = hardware.device_name()
    backends: dict[str, str] = {}
    for key, cls in sorted(registry().items()):
        try:
            backends[key] = cls().capability().value
        except Exception as exc:  # noqa: BLE001 - one broken backend must not hide the rest
            print(f"capability of {key} unknown: {exc!r}", file=sys.stderr)
            backends[key] = "unavailable"
    kind = "gpu" if gpus else "cpu"
    return {"name": name, "kind": kind, "gpus": gpus, "backends": backends}


def _describe_safely() -> dict[str, Any] | None:
    try:
        return describe_machine()
    except Exception:  # noqa: BLE001 - the child can still run jobs without it
        _print_exc()
        return None


def _print_exc() -> None:
    # Printing can itself fail right after a MemoryError; the verdict matters more.
    try:
        traceback.print_exc()
    except Exception:  # noqa: BLE001
        pass


def _has_gpu() -> bool:
    from kplay.kernels.hardware import has_cuda_gpu

    return has_cuda_gpu()


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def _line_buffer_c_stdio() -> None:
    # C stdout into a file is fully buffered: a kernel's printf would be lost when the
    # child is killed for a timeout, exactly when it matters most.
    libc = _libc()
    if libc is None:
        return
    try:
        for name in ("stdout", "stderr"):
            stream = ctypes.c_void_p.in_dll(libc, name)
            libc.setvbuf(stream, None, 1, 0)  # 1 = _IOLBF
    except (ValueError, AttributeError):
        pass


def _flush_all() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    libc = _libc()
    if libc is not None:
        libc.fflush(None)


if __name__ == "__main__":
    main()
    # Skip interpreter teardown: library destructors (CUDA, LLVM) after a poisoned
    # context can hang or crash, and there is nothing left to save.
    _flush_all()
    os._exit(0)
