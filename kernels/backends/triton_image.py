"""Triton kernel images (built in the learner's box by triton_artifact), launched by the
evaluator on torch CUDA tensors and NumPy scalars, as Triton's launcher would.

Each launch packs the parameters the artefact lists (tensor addresses, scalars as the
types Triton gave them, the scratch pointers), runs on torch's current stream with
32 * num_warps threads per program and the metadata's dynamic shared memory (opted in
past 48 KiB), and allocates global scratch when the kernel asks for some.
"""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np

from kplay.kernels.artifact import Artifact
from kplay.kernels.backends import pysource
from kplay.kernels.backends.base import (
    CompiledKernel,
    DeferredCompileError,
    KernelError,
    LaunchSpec,
)
from kplay.kernels.backends.image_launch import LoadedImage, device_pointer, scalar
from kplay.kernels.backends.triton_artifact import BACKEND, CONVENTION
from kplay.kernels.models import CompileStage


class TritonImage:
    """One compiled variant (one autotune config): its image and how to launch it."""

    def __init__(self, artifact: Artifact) -> None:
        abi = artifact.abi
        if artifact.backend != BACKEND or abi.get("convention") != CONVENTION:
            raise KernelError(f"not a Triton kernel image ({artifact.backend})")
        if artifact.format != "cubin":
            raise KernelError("a Triton image is a cubin")
        self.abi = abi
        self.args: list[dict[str, Any]] = list(abi["args"])
        self.params: list[dict[str, Any]] = list(abi["params"])
        for p in self.params:
            if p["ctype"] != "bfloat16":
                np.dtype(p["ctype"])  # refuses a type it does not know
        self.num_warps = int(abi["num_warps"])
        self.num_ctas = int(abi.get("num_ctas", 1))
        self.shared = int(abi.get("shared", 0))
        self.scratch = {k: dict(abi.get(k) or {"size": 0, "align": 1}) for k in
                        ("global_scratch", "profile_scratch")}  # fmt: skip
        if self.num_ctas != 1 or abi.get("launch_cooperative_grid") or abi.get("launch_pdl"):
            raise KernelError("this kernel needs a cluster, cooperative or PDL launch")
        self.image = LoadedImage(artifact.image(), artifact.format, artifact.entry)
        self.stage = artifact.stage
        self.config = abi.get("config")
        self._buffers: dict[str, Any] = {}

    def check_shared(self) -> None:
        """Triton refuses, at load, a kernel that needs more shared memory than a block has."""
        static, optin = self.image.shared_limits()
        if static + self.shared > optin:
            message = (
                f"out of resources: the kernel needs {self.shared} bytes of shared memory, "
                f"the device gives a block {optin - static}"
            )
            raise DeferredCompileError(pysource.failed_stage(message, compiler=self._compiler()))

    def launch(self, args: list[Any], grid: tuple[int, int, int]) -> None:
        import torch

        if grid[0] * grid[1] * grid[2] == 0:
            return  # Triton launches nothing for an empty grid
        if len(args) != len(self.args):
            raise KernelError(f"the kernel takes {len(self.args)} arguments, got {len(args)}")
        for arg, want in zip(args, self.args, strict=True):
            _check_arg(arg, want)
        values = []
        for p in self.params:
            if "arg" in p:
                values.append(_value(p, args[p["arg"]]))
            elif "default" in p:
                values.append(scalar(p["ctype"], p["default"]))
            else:
                values.append(np.uint64(self._scratch(p["scratch"], grid, args)))
        if self.shared > 48 * 1024 and not self._buffers.get("shared-checked"):
            self.check_shared()
            self._buffers["shared-checked"] = True
        stream = _stream(torch.cuda.current_stream().cuda_stream)
        block = (32 * self.num_warps, 1, 1)
        self.image.launch(grid, block, values, self.shared, stream)

    def _scratch(self, kind: str, grid: tuple[int, int, int], args: list[Any]) -> int:
        size, align = int(self.scratch[kind]["size"]), int(self.scratch[kind]["align"])
        if size <= 0:
            return 0
        import torch

        need = grid[0] * grid[1] * grid[2] * self.num_ctas * size + align
        buffer = self._buffers.get(kind)
        if buffer is None or buffer.numel() < need:
            device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
            buffer = torch.empty(need, dtype=torch.uint8, device=device or "cuda")
            self._buffers[kind] = buffer
        ptr = int(buffer.data_ptr())
        return ptr + (-ptr) % align

    def _compiler(self) -> str | None:
        return self.stage.compiler if self.stage is not None else None


def _check_arg(arg: Any, want: dict[str, Any]) -> None:
    name = want["name"]
    if want["kind"] == "array":
        if want.get("aligned") and device_pointer(arg) % 16:
            raise KernelError(f"{name}: the image was built for a 16-byte aligned array")
        return
    if "constant" in want and arg != want["constant"]:
        raise KernelError(f"{name}: the image was built for {want['constant']}, not {arg}")
    if want.get("aligned") and int(arg) % 16:
        raise KernelError(f"{name}: the image was built for a multiple of 16, not {arg}")


def _value(p: dict[str, Any], arg: Any) -> Any:
    if p["type"].startswith("*"):
        return np.uint64(device_pointer(arg))
    return scalar(p["ctype"], arg.item() if isinstance(arg, np.generic) else arg)


_STREAMS: dict[int, Any] = {}


def _stream(ptr: int) -> Any:
    """CuPy's handle on torch's stream (the launches must follow the torch work)."""
    if ptr not in _STREAMS:
        import cupy

        _STREAMS[ptr] = cupy.cuda.Stream.null if ptr == 0 else cupy.cuda.ExternalStream(ptr)
    return _STREAMS[ptr]


class TritonImageKernel(CompiledKernel):
    """A Triton kernel loaded from its image; an autotuned one from one image per config.

    Autotuned: at its first launch the kernel runs every config on the caller's own
    arrays, `warmup` times untimed and then `reps` times, each run timed with CUDA events
    on torch's current stream, and keeps the config with the lowest median time for this
    launch and every later one. Arguments the autotuner names in reset_to_zero are zeroed
    before each run, and those in restore_value are put back from a copy after each run,
    as Triton's autotuner does; a config that cannot run here (more shared memory than the
    device has) is skipped. The first launch's output is that of the kept config, run once
    more after the timing.
    """

    def __init__(self, artifact: Artifact) -> None:
        tune = artifact.abi.get("autotune")
        if tune:
            configs = [Artifact.model_validate(c) for c in tune["configs"]]
            self.choices = [TritonImage(a) for a in configs]
            self.reset = [int(i) for i in tune.get("reset_to_zero", [])]
            self.restore = [int(i) for i in tune.get("restore_value", [])]
            self.warmup, self.reps = int(tune.get("warmup", 1)), max(int(tune.get("reps", 5)), 1)
        else:
            self.choices = [TritonImage(artifact)]
        self.chosen: TritonImage | None = self.choices[0] if len(self.choices) == 1 else None
        self.timings: dict[str, float] = {}
        self.names: list[str] | None = artifact.abi.get("parameters")
        self.stage = artifact.stage

    def launch(self, args: list[Any], spec: LaunchSpec) -> None:
        grid = (tuple(int(g) for g in spec.grid) + (1, 1, 1))[:3] if spec.grid else (1, 1, 1)
        if self.chosen is None:
            self.chosen = self._tune(args, grid)
        self.chosen.launch(args, grid)  # type: ignore[arg-type]

    def _tune(self, args: list[Any], grid: Any) -> TritonImage:
        import torch

        saved = {i: args[i].clone() for i in self.restore}
        best: tuple[float, TritonImage] | None = None
        failure: Exception | None = None
        for choice in self.choices:
            try:
                ms = self._time(choice, args, grid, saved)
            except Exception as exc:
                # A config that cannot run here (too much shared memory, too many threads
                # for its registers) is skipped, as Triton's autotuner skips it.
                if not isinstance(exc, KernelError | DeferredCompileError) and (
                    type(exc).__name__ != "CUDADriverError"
                ):
                    raise
                failure = failure or exc
                continue
            self.timings[choice.config or "?"] = ms
            if best is None or ms < best[0]:
                best = (ms, choice)
        for i, copy in saved.items():
            args[i].copy_(copy)
        for i in self.reset:
            args[i].zero_()
        torch.cuda.current_stream().synchronize()
        if best is None:
            raise failure or KernelError("no autotune config could run")
        return best[1]

    def _time(self, choice: TritonImage, args: list[Any], grid: Any, saved: dict) -> float:
        import torch

        times = []
        for rep in range(self.warmup + self.reps):
            for i in self.reset:
                args[i].zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            choice.launch(args, grid)
            end.record()
            for i, copy in saved.items():
                args[i].copy_(copy)
            if rep >= self.warmup:
                times.append((start, end))
        times[-1][1].synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in times)

    def parameters(self) -> list[str] | None:
        return self.names

    def report(self) -> CompileStage | None:
        chosen = self.chosen or self.choices[0]
        stage = chosen.stage or self.stage
        if stage is None or not self.timings:
            return stage
        ranked = ", ".join(
            f"{c}: {ms * 1e3:.1f} us" for c, ms in sorted(self.timings.items(), key=lambda t: t[1])
        )
        return stage.model_copy(
            update={"log": f"{stage.log}\nautotune kept {chosen.config} ({ranked})"}
        )
