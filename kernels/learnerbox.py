"""The learner's box: `python -m kplay.kernels.learnerbox FD`. Learner code runs here only.

One box serves one job, or the same learner's runs of the same source one after the
other (workers/learner.py says when), then exits. The trusted evaluator
(kernels.evaluate, in another process) asks it, over the socket FD (kernels.boxwire), to:

- `load` the learner's source for a backend: import it (its top-level code runs here),
  compile it, and answer with the compile stage and the kernel's parameter names. In
  `export` mode (a GPU backend) the box then `build`s artefacts (kernels.artifact) that the
  evaluator loads and launches itself; in `host` mode (numba-cpu, Numba's CUDA simulator,
  Triton's interpreter) the box keeps the function and `call`s it on arrays in shared
  memory the evaluator owns (kernels.shm), while the evaluator's clock times the call.
- `segments`: map the shared-memory segments whose descriptors come with the message
  (and unmap the ones it names as dropped: a warm evaluator recycles its segments).
- `report`: what a lazy JIT learned at its first launch.

Everything here is untrusted once learner code has run: the evaluator checks every
answer's shape, times every call itself and checks every output itself, and the worker
sandboxes this process and ends it (and anything it started) with the job.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

from kplay.kernels.boxwire import OK, Wire, WireError


class _Box:
    def __init__(self, wire: Wire) -> None:
        from kplay.kernels.shm import MappedSegments

        self.wire = wire
        self.segments = MappedSegments()
        self.backend: Any = None
        self.kernel: Any = None  # host mode: a CompiledKernel
        self.exporter: Any = None  # export mode: a backend Exporter
        self.torch = False
        self.workdir = Path(tempfile.mkdtemp(prefix="box-"))
        # Launches seen before, by their exact request: a timed loop repeats a handful.
        self._calls: dict[bytes, tuple[list[Any], Any]] = {}

    def serve(self) -> None:
        while True:
            try:
                body, fds = self.wire.recv_frame()
                seen = None if fds else self._calls.get(body)
                if seen is not None:
                    self._launch(*seen)
                    continue
                message = self.wire.decode(body, fds)
            except WireError:
                return
            op = message.get("op")
            try:
                if op == "segments":
                    answer = self._segments(message, fds)
                elif op == "load":
                    answer = self._load(message)
                elif op == "call":
                    answer = self._call(message, body)
                elif op == "build":
                    answer = self._build(message)
                elif op == "report":
                    answer = self._report()
                else:
                    answer = _error("protocol", f"unknown request {op!r}")
            except BaseException as exc:  # noqa: BLE001 - every learner failure is an answer
                if isinstance(exc, KeyboardInterrupt | SystemExit):
                    raise
                answer = _from_exception(exc)
            _flush()
            try:
                self.wire.send(answer)
            except WireError:
                return

    # ------------------------------------------------------------ requests

    def _segments(self, message: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        items = message.get("items", [])
        if len(items) != len(fds):
            for fd in fds:
                os.close(fd)
            return _error("protocol", "segment list and descriptors disagree")
        for ident in message.get("drop", []):
            self.segments.drop(int(ident))
            self._calls.clear()  # its arrays would keep the dropped pages mapped
        for (ident, size), fd in zip(items, fds, strict=True):
            self.segments.add(int(ident), int(size), fd)
        return {"ok": True}

    def _load(self, message: dict[str, Any]) -> dict[str, Any]:
        from kplay.kernels.backends.base import ArrayKind, get_backend

        self.backend = get_backend(str(message["backend"]))
        target = message.get("target_cc")
        self.backend.target_cc = str(target) if target else None
        if message.get("variant"):
            from kplay.kernels.artifact import Variant

            self.backend.variant_hint = Variant.model_validate(message["variant"])  # type: ignore[attr-defined]
        source, name = str(message["source"]), str(message["kernel"])
        if message.get("mode") == "export":
            stage, self.exporter = self.backend.export(source, name, self.workdir)
            loaded: Any = self.exporter
        else:
            stage, self.kernel = self.backend.compile(source, name, self.workdir)
            self.torch = self.backend.array_kind() is ArrayKind.torch_cpu
            loaded = self.kernel
        return {
            "ok": True,
            "stage": stage.model_dump(mode="json"),
            "params": loaded.parameters() if loaded is not None else None,
            "runnable": loaded is not None,
            "threads": int(getattr(self.kernel, "threads", 1) or 1),
        }

    def _call(self, message: dict[str, Any], body: bytes) -> dict[str, Any]:
        from kplay.kernels.backends.base import LaunchSpec

        if self.kernel is None:
            return _error("protocol", "no kernel is loaded")
        args = [self._argument(a) for a in message["args"]]
        raw = message["spec"]
        spec = LaunchSpec(**{**raw, "grid": tuple(raw["grid"]), "block": tuple(raw["block"])})
        self.kernel.launch(args, spec)
        if len(self._calls) < 256:
            self._calls[body] = (args, spec)
        return {"ok": True}

    def _launch(self, args: list[Any], spec: Any) -> None:
        """A launch seen before, answered like any other (WireError ends the loop)."""
        try:
            self.kernel.launch(args, spec)
        except BaseException as exc:  # noqa: BLE001 - answered like any other failure
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            _flush()
            self.wire.send(_from_exception(exc))
            return
        self.wire.send_frame(OK)

    def _argument(self, where: dict[str, Any]) -> Any:
        import numpy as np

        if "scalar" in where:
            return np.dtype(where["dtype"]).type(where["scalar"])
        array = self.segments.array(where)
        if self.torch:
            import torch

            from kplay.kernels.arrays import torch_view

            return torch_view(torch, array)  # bfloat16 and float8 through their bits
        return array

    def _build(self, message: dict[str, Any]) -> dict[str, Any]:
        from kplay.kernels.artifact import Variant

        if self.exporter is None:
            return _error("protocol", "nothing is loaded to build")
        artifact = self.exporter.build(Variant.model_validate(message["variant"]))
        return {"ok": True, "artifact": artifact.model_dump(mode="json")}

    def _report(self) -> dict[str, Any]:
        stage = self.kernel.report() if self.kernel is not None else None
        return {"ok": True, "stage": stage.model_dump(mode="json") if stage else None}


def _error(kind: str, message: str, **rest: Any) -> dict[str, Any]:
    return {"ok": False, "error": {"kind": kind, "message": message, **rest}}


def _from_exception(exc: BaseException) -> dict[str, Any]:
    from kplay.kernels.backends.base import DeferredCompileError, KernelError
    from kplay.kernels.backends.pysource import learner_trace
    from kplay.kernels.launch import LaunchError

    if isinstance(exc, DeferredCompileError):
        return _error("compile", str(exc), stage=exc.stage.model_dump(mode="json"))
    if isinstance(exc, KernelError):
        return _error("kernel", str(exc))
    if isinstance(exc, LaunchError):
        return _error("launch", str(exc))
    traceback.print_exc()
    return _error("exception", learner_trace(exc), type=type(exc).__name__)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - learner code may have replaced the streams
            pass


# Backends whose libraries take seconds to import: Triton brings torch (2-3 s of a 3-5 s
# warm-up on a 2-vCPU host, bench/RESULTS.md). A box imports them when a job of theirs
# arrives, so that it is ready that much sooner for every other backend's job.
IMPORTED_ON_DEMAND = ("triton",)


def warm_up() -> None:
    """Import what loading a learner's module needs, before the job arrives."""
    from kplay.kernels.hardware import prepare_cpu_fallbacks

    prepare_cpu_fallbacks()
    import numba  # noqa: F401

    from kplay.kernels.backends.base import registry

    for key, cls in registry().items():
        if key in IMPORTED_ON_DEMAND:
            continue
        try:
            cls().capability()  # imports the backend's libraries where they exist
        except Exception:  # noqa: BLE001 - a backend that cannot load says so at load
            traceback.print_exc()


def serve(fd: int) -> None:
    """Answer the evaluator on socket `fd` until it hangs up."""
    wire = Wire.from_fd(fd)
    os.chdir(tempfile.mkdtemp(prefix="box-cwd-"))
    _Box(wire).serve()


def main(argv: list[str] | None = None) -> None:
    """An unconfined box (tests, benchmarks); a worker starts kplay.workers.boxmain."""
    args = sys.argv[1:] if argv is None else argv
    if "--no-warm" not in args:
        warm_up()
    serve(int(args[0]))


if __name__ == "__main__":
    main()
