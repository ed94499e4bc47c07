"""The evaluator's side of the learner's box (kernels.learnerbox): kernels it cannot touch.

`BoxClient.compile()` stands where `Backend.compile()` stood: it asks the box to load the
learner's source and returns the compile stage and a CompiledKernel the harness uses as
before. For a host backend that kernel (`HostCall`) sends every launch to the box and
waits for it, the arguments named by where they lie in shared memory; for a GPU backend
(`ArtifactKernel`) it has the box build an artefact per launch variant and loads and
launches that itself. Every answer is checked: the box runs learner code, and what it
says is data, never code or a verdict.
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import socket
import subprocess
import sys
from typing import Any

import numpy as np

from kplay.kernels.artifact import ArgSpec, Artifact, Variant
from kplay.kernels.backends.base import (
    Backend,
    CompiledKernel,
    DeferredCompileError,
    KernelError,
    LaunchSpec,
)
from kplay.kernels.boxwire import MAX_FDS, OK, Wire, WireError
from kplay.kernels.launch import LaunchError
from kplay.kernels.models import CompileStage, Diagnostic
from kplay.kernels.shm import SharedArena

# An answer takes as long as the learner's code does; the worker's own deadline on the
# whole job is what stops a box that never answers.
_ANSWER_TIMEOUT_S = 3600.0


# How a job that lost its box ends; the worker, which sees how the box died, says more.
BOX_GONE = "the learner's process stopped answering"


class BoxFailure(Exception):
    """The box broke the protocol, died or went silent: the job cannot go on."""


class LearnerException(Exception):
    """The learner's code raised in the box; the message is its trace there."""

    def __init__(self, trace: str, type_name: str) -> None:
        super().__init__(trace)
        self.trace = trace
        self.type_name = type_name


class BoxClient:
    """One box, seen from the evaluator.

    `arena`: the shared memory the box's arrays live in. A worker's evaluator passes its
    own, kept from job to job and box to box (kernels.shm); without one the client makes
    one and closes it with itself. `kept`: the host kernels this box loaded, by backend,
    source hash and kernel name, for a later job of the same learner and source that the
    worker gives the same box (workers/learner.py): it calls the function the box already
    compiled instead of loading the source again.
    """

    def __init__(self, wire: Wire, arena: SharedArena | None = None) -> None:
        self.wire = wire
        self.used = False  # learner code reached the box
        self.arena = arena
        self._own_arena = arena is None
        self.kept: dict[tuple[str, str, str], tuple[CompileStage, HostCall]] = {}
        if arena is not None:
            arena.new_box()

    @classmethod
    def from_fd(cls, fd: int, arena: SharedArena | None = None) -> BoxClient:
        return cls(Wire.from_fd(fd), arena)

    def idle_bytes(self) -> bool:
        """Whether the box wrote while no request was out: it is not to be trusted again."""
        try:
            return bool(select.select([self.wire.sock], [], [], 0)[0])
        except (OSError, ValueError):
            return True

    def close(self) -> None:
        if self.arena is not None and self._own_arena:
            self.arena.close()
        self.arena = None
        self.kept.clear()
        self.wire.close()

    def request(self, message: dict[str, Any], fds: list[int] | None = None) -> dict[str, Any]:
        return self.request_frame(json.dumps(message, separators=(",", ":")).encode(), fds)

    def request_frame(self, body: bytes, fds: list[int] | None = None) -> dict[str, Any]:
        self.used = True
        try:
            self.wire.send_frame(body, fds)
            raw, extra = self.wire.recv_frame(_ANSWER_TIMEOUT_S)
            for fd in extra:  # the box has no business sending descriptors
                os.close(fd)
            if raw == OK:
                return {"ok": True}
            answer = self.wire.decode(raw, [])
        except WireError as exc:
            raise BoxFailure(f"{BOX_GONE}: {exc}") from None
        if answer.get("ok") is True:
            return answer
        error = answer.get("error")
        if not isinstance(error, dict):
            raise BoxFailure("the learner's process sent an answer that is not one")
        raise _raise_for(error)

    # ------------------------------------------------------------ compiling

    def compile(
        self, backend: Backend, source: str, kernel_name: str, *, export: bool
    ) -> tuple[CompileStage, CompiledKernel | None]:
        load = {
            "op": "load",
            "backend": backend.key,
            "source": source,
            "kernel": kernel_name,
            "mode": "export" if export else "host",
            "target_cc": _device_cc() if export else None,
        }
        hint = getattr(backend, "variant_hint", None)
        if hint is not None:
            load["variant"] = hint.model_dump(mode="json")
        answer = self.request(load)
        stage = CompileStage.model_validate(answer.get("stage"))
        params = _names(answer.get("params"))
        if not stage.ok or answer.get("runnable") is not True:
            return stage, None
        if export:
            return stage, ArtifactKernel(backend, self, params, load)
        if self.arena is None:
            self.arena = SharedArena()
        kernel = HostCall(self, self.arena, params, _threads(answer.get("threads")))
        self.arena.on_new = kernel.hand_segments
        return stage, kernel

    def kept_kernel(self, key: tuple[str, str, str]) -> tuple[CompileStage, HostCall] | None:
        """A host kernel this box loaded for an earlier job, ready for this one."""
        hit = self.kept.get(key)
        if hit is None or self.arena is None:
            return None
        stage, kernel = hit
        kernel.for_next_job()
        self.arena.on_new = kernel.hand_segments
        return stage.model_copy(deep=True), kernel


def spawn_plain_box() -> tuple[BoxClient, subprocess.Popen[bytes]]:
    """An unconfined box, for trusted callers (tests, benchmarks).

    A worker starts its boxes sandboxed and under limits (workers/learner.py); this one
    only keeps the learner's code out of the calling process.
    """
    from kplay.kernels.hardware import has_cuda_gpu

    ours, theirs = socket.socketpair()
    theirs.set_inheritable(True)
    command = [sys.executable, "-P", "-s", "-m", "kplay.kernels.learnerbox", str(theirs.fileno())]
    flag = "0" if has_cuda_gpu() else "1"
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": flag, "TRITON_INTERPRET": flag}
    try:
        proc = subprocess.Popen(command, pass_fds=(theirs.fileno(),), env=env)
    finally:
        theirs.close()
    return BoxClient.from_fd(ours.detach()), proc


class HostCall(CompiledKernel):
    """A host kernel that lives in the box: each launch is one round trip, no copies."""

    def __init__(
        self, client: BoxClient, arena: SharedArena, params: list[str] | None, threads: int
    ) -> None:
        self.client = client
        self.arena = arena
        self._params = params
        self.threads = threads  # what the box's function may use, for the CPU roofline
        self._bodies: dict[tuple[Any, ...], bytes] = {}  # requests already encoded

    def parameters(self) -> list[str] | None:
        return self._params

    def for_next_job(self) -> None:
        """A later job on the same box: the last job's arrays and requests are gone."""
        self._bodies.clear()

    def hand_segments(self) -> None:
        """Give the box every segment it lacks (it maps them, page tables and all), and
        tell it which of those it has the evaluator closed."""
        dropped = self.arena.take_dropped()
        if dropped:
            self.client.request({"op": "segments", "items": [], "drop": dropped}, [])
        new = self.arena.take_unsent()
        for at in range(0, len(new), MAX_FDS):
            batch = new[at : at + MAX_FDS]
            items = [[ident, size] for ident, size, _ in batch]
            self.client.request({"op": "segments", "items": items}, [fd for *_, fd in batch])

    def launch(self, args: list[Any], spec: LaunchSpec) -> None:
        self.hand_segments()
        where = (spec.grid, spec.block, spec.shared_mem_bytes, *_launch_shape([], spec))
        key = (where, *(_identity(a) for a in args))
        body = self._bodies.get(key)
        if body is None:
            wired = [self._wire_arg(a) for a in args]
            message = {"op": "call", "args": wired, "spec": dataclasses.asdict(spec)}
            body = json.dumps(message, separators=(",", ":")).encode()
            if len(self._bodies) < 256:
                self._bodies[key] = body
        self.client.request_frame(body)

    def _wire_arg(self, arg: Any) -> dict[str, Any]:
        if isinstance(arg, np.generic):
            return {"scalar": arg.item(), "dtype": arg.dtype.str}
        if isinstance(arg, int | float):
            return {"scalar": arg, "dtype": np.asarray(arg).dtype.str}
        return self.arena.locate(arg)

    def report(self) -> CompileStage | None:
        answer = self.client.request({"op": "report"})
        raw = answer.get("stage")
        return CompileStage.model_validate(raw) if raw else None


class ArtifactKernel(CompiledKernel):
    """A GPU kernel the box compiled and the evaluator loaded: launched here, untouched.

    A warm evaluator keeps it (kernels.compiling) and launches every variant it has
    loaded without asking any box; a variant it has not met yet is built by the box of
    the job at hand, which is first given the source, as the first box was.
    """

    def __init__(
        self, backend: Backend, client: BoxClient, params: list[str] | None,
        load: dict[str, Any],
    ) -> None:  # fmt: skip
        self.backend = backend
        self.client: BoxClient | None = client
        self._params = params
        self._load = load  # the request that loads the source into a box
        self._box_has_source = True
        self._report: CompileStage | None = None
        self._loaded: dict[str, CompiledKernel] = {}  # by variant
        self._by_launch: dict[tuple[Any, ...], CompiledKernel] = {}  # by launch, this job

    def parameters(self) -> list[str] | None:
        return self._params

    def rebind(self, client: BoxClient | None) -> None:
        """A later job reuses this kernel; unbuilt variants come from its box."""
        self.client = client
        self._box_has_source = False
        self._by_launch.clear()  # the last job's arrays and specs are gone

    def launch(self, args: list[Any], spec: LaunchSpec) -> None:
        # Between a timing event and the kernel: a tuple lookup, not a model and a hash.
        shape = _launch_shape(args, spec)
        kernel = self._by_launch.get(shape)
        if kernel is None:
            # A backend told the problem's types (the CuTe DSL: bfloat16 arrays reach it as
            # their bits) builds for those, not for what the arrays hold.
            hint = getattr(self.backend, "variant_hint", None)
            variant = hint if hint is not None else variant_of(self.backend.key, args, spec)
            kernel = self._loaded.get(variant.key())
            if kernel is None:
                kernel = self._loaded[variant.key()] = self._build(variant)
            self._by_launch[shape] = kernel
        kernel.launch(args, spec)

    def _build(self, variant: Variant) -> CompiledKernel:
        if self.client is None:
            raise BoxFailure("a new launch variant, and no box to build it")
        if not self._box_has_source:
            answer = self.client.request(self._load)
            if not CompileStage.model_validate(answer.get("stage")).ok:
                raise BoxFailure("the source that compiled before did not compile in a new box")
            self._box_has_source = True
        answer = self.client.request({"op": "build", "variant": variant.model_dump(mode="json")})
        artifact = Artifact.model_validate(answer.get("artifact"))
        if artifact.backend != self.backend.key:
            raise BoxFailure("the box built an artefact for another backend")
        if artifact.stage is not None and self._report is None:
            self._report = artifact.stage
        return self.backend.load(artifact)

    def report(self) -> CompileStage | None:
        return self._report


def variant_of(backend: str, args: list[Any], spec: LaunchSpec) -> Variant:
    """The launch's variant, with only what `backend` compiles differently for."""
    if backend == "cuda":  # one image serves every launch
        return Variant(args=())
    specs = []
    for arg in args:
        if isinstance(arg, np.generic | int | float):
            dtype = np.asarray(arg).dtype
            value = arg.item() if isinstance(arg, np.generic) else arg
            specs.append(ArgSpec(kind="scalar", dtype=dtype.name, value=value))
        else:
            dtype = arg.dtype if isinstance(arg.dtype, np.dtype) else _torch_dtype(arg)
            specs.append(ArgSpec(kind="array", dtype=np.dtype(dtype).name, ndim=arg.ndim))
    if backend != "triton":  # Numba specialises on types only
        specs = [ArgSpec(kind=s.kind, dtype=s.dtype, ndim=s.ndim) for s in specs]
        return Variant(args=tuple(specs))
    return Variant(
        args=tuple(specs),
        constants=tuple(sorted((k, int(v)) for k, v in spec.constants.items())),
        num_warps=spec.num_warps,
        num_stages=spec.num_stages,
    )


def _device_cc() -> str:
    """The compute capability of this process's GPU, for a box that sees none."""
    from kplay.kernels.hardware import current_gpu

    return current_gpu().compute_capability


def _torch_dtype(tensor: Any) -> np.dtype:
    """The NumPy type of a torch tensor's elements: bfloat16 and float8 as ml_dtypes'
    (torch has no NumPy type for them and refuses `.numpy()`)."""
    import torch

    from kplay.kernels.arrays import _numpy_dtype

    extension = _numpy_dtype(tensor.dtype)
    if extension is not None:
        return np.dtype(extension)
    return torch.empty(0, dtype=tensor.dtype).numpy().dtype


def _launch_shape(args: list[Any], spec: LaunchSpec) -> tuple[Any, ...]:
    """Every launch with the same value here has the same variant, for every backend."""
    parts: list[Any] = [tuple(sorted(spec.constants.items())), spec.num_warps, spec.num_stages]
    for arg in args:
        if isinstance(arg, np.generic | int | float):
            parts.append((type(arg), arg))
        else:
            parts.append((str(arg.dtype), arg.ndim))
    return tuple(parts)


def _identity(arg: Any) -> tuple[Any, ...]:
    """What makes two launches' arguments the same request: where, what shape, what value."""
    if isinstance(arg, np.generic | int | float):
        return ("s", type(arg).__name__, arg.item() if isinstance(arg, np.generic) else arg)
    if hasattr(arg, "data_ptr"):
        return ("t", id(arg), arg.data_ptr(), tuple(arg.shape), tuple(arg.stride()), str(arg.dtype))
    iface = arg.__array_interface__
    return ("a", id(arg), iface["data"][0], arg.shape, arg.strides, arg.dtype.str)


def _threads(raw: Any) -> int:
    """The box's word for its thread count, within what this machine has."""
    most = os.cpu_count() or 1
    return min(max(raw, 1), most) if isinstance(raw, int) and not isinstance(raw, bool) else 1


def _names(raw: Any) -> list[str] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(isinstance(n, str) for n in raw):
        raise BoxFailure("the box sent parameter names that are not names")
    return [n[:200] for n in raw[:256]]


def _raise_for(error: dict[str, Any]) -> Exception:
    kind = error.get("kind")
    message = str(error.get("message", ""))[:20000]
    if kind == "compile":
        try:
            stage = CompileStage.model_validate(error.get("stage"))
        except ValueError:
            stage = CompileStage(ok=False, log=message, diagnostics=[Diagnostic(message=message)])
        stage.ok = False
        return DeferredCompileError(stage)
    if kind == "kernel":
        return KernelError(message)
    if kind == "launch":
        return LaunchError(message)
    if kind == "exception":
        return LearnerException(message, str(error.get("type", "Exception"))[:100])
    return BoxFailure(f"the learner's process broke the protocol: {message}")
