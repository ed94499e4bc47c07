"""CUTLASS C++: CuTe and CUTLASS 3 kernels, compiled by nvcc and launched on a GPU.

The learner's file defines a `__global__` kernel (usually `extern "C"`) that takes plain
pointers and sizes, as a CUDA C++ cell does; inside it, anything the CUTLASS and CuTe
headers offer: tensors and layouts, tiled copies and MMAs, a CUTLASS 3 collective
mainloop driven by the kernel itself. Host code such as `GemmUniversalAdapter` never
runs: the trusted evaluator launches the kernel with arguments it packs itself.

In the learner's box nvcc builds a cubin for the device's architecture (`sm_90a` on a
9.0 device: the Hopper instructions CUTLASS 3 uses need the arch-specific target), with
the resource report, PTX and SASS from the same call (kernels.backends.cutlass_build).
The evaluator loads that cubin and launches it through the same checked `CupyKernel` as
CUDA C++. Where no GPU runs it, the backend is compile-only; without nvcc or the headers
(`pip install nvidia-cutlass`), unavailable.
"""

from __future__ import annotations

import time
from functools import lru_cache
from pathlib import Path

from kplay.kernels.artifact import Artifact
from kplay.kernels.backends.base import (
    ArrayKind,
    Backend,
    Capability,
    CompiledKernel,
    register,
)
from kplay.kernels.backends.cuda import _cupy_available, _device_limits
from kplay.kernels.backends.cuda_artifact import CudaExporter, load_cubin
from kplay.kernels.backends.cuda_source import normalise_arch
from kplay.kernels.backends.cutlass_build import (
    Build,
    Headers,
    build,
    cutlass_settings,
    find_headers,
)
from kplay.kernels.backends.toolkit_find import find_tool, host_compiler, tool_version
from kplay.kernels.hardware import has_cuda_gpu
from kplay.kernels.models import CompileStage, Diagnostic


@lru_cache(maxsize=1)
def _nvcc() -> Path | None:
    return find_tool("nvcc")


def cutlass_arch(value: str) -> str:
    """The target for CUTLASS kernels: arch-specific ('sm_90a') from Hopper on.

    wgmma, setmaxnreg and the cluster instructions exist only on the `a` targets; a cubin
    built for one loads only on that exact architecture, which is the device's own.
    """
    arch = normalise_arch(value)
    number = arch.removeprefix("sm_")
    if number.isdigit() and int(number) >= 90:
        return f"{arch}a"
    return arch


@register
class CutlassBackend(Backend):
    key = "cutlass"
    title = "CUTLASS C++ (CuTe)"
    language = "cpp"

    def __init__(
        self,
        arch: str | None = None,
        cache_dir: Path | None = None,
        nvcc_timeout_s: float | None = None,
    ) -> None:
        from kplay.config import EngineSettings

        settings = EngineSettings()
        self.arch = cutlass_arch(arch or settings.cuda_arch)
        self.cache_dir = cache_dir or settings.cache_root() / "cutlass"
        self.nvcc_timeout_s = nvcc_timeout_s or cutlass_settings()[1]

    # ------------------------------------------------------------ protocol

    def capability(self) -> Capability:
        if self.missing() is not None:
            return Capability.unavailable
        if has_cuda_gpu() and _cupy_available():
            return Capability.run
        return Capability.compile_only

    def missing(self) -> str | None:
        """Why CUTLASS C++ cannot be compiled here, or None when it can."""
        if find_headers() is None:
            return (
                "CUTLASS C++ cannot be compiled here: the CUTLASS headers were not found "
                "(pip install nvidia-cutlass, or set KPLAY_ENGINE_CUTLASS_INCLUDE)"
            )
        if _nvcc() is None or host_compiler() is None:
            return "CUTLASS C++ cannot be compiled here: it needs nvcc and a host C++ compiler"
        return None

    def array_kind(self) -> ArrayKind:
        return ArrayKind.cupy

    def compile(
        self, source: str, kernel_name: str, workdir: Path
    ) -> tuple[CompileStage, CompiledKernel | None]:
        started = time.perf_counter()
        cap = self.capability()
        if cap is Capability.unavailable:
            message = self.missing() or "CUTLASS C++ cannot be compiled here"
            return CompileStage(
                ok=False, log=message, diagnostics=[Diagnostic(message=message)]
            ), None
        arch = self._device_arch() if cap is Capability.run else self.arch
        result = self._build(source, kernel_name, arch, Path(workdir))
        result.stage.duration_ms = (time.perf_counter() - started) * 1000
        if cap is Capability.compile_only or not result.stage.ok:
            return result.stage, None
        return result.stage, self.load(self._artifact(result, arch))

    # ------------------------------------------------------------ in two halves

    def exports(self) -> bool:
        return self.capability() is Capability.run

    def export(
        self, source: str, kernel_name: str, workdir: Path
    ) -> tuple[CompileStage, CudaExporter | None]:
        """In the learner's box: nvcc's cubin and report, nothing loaded."""
        started = time.perf_counter()
        missing = self.missing()
        if missing is not None:
            return CompileStage(
                ok=False, log=missing, diagnostics=[Diagnostic(message=missing)]
            ), None
        arch = cutlass_arch(self.target_cc) if self.target_cc else self._device_arch()
        result = self._build(source, kernel_name, arch, Path(workdir))
        result.stage.duration_ms = (time.perf_counter() - started) * 1000
        if not result.stage.ok or result.image is None:
            return result.stage, None
        return result.stage, CudaExporter(self._artifact(result, arch), result.params)

    def load(self, artifact: Artifact) -> CompiledKernel:
        """In the evaluator: the box's cubin, loaded by the driver, launched with checks."""
        import cupy

        return load_cubin(artifact, _device_limits(cupy.cuda.Device().id))

    def versions(self) -> dict[str, str]:
        out: dict[str, str] = {}
        nvcc = _nvcc()
        if nvcc is not None and (v := tool_version(nvcc)):
            out["nvcc"] = v
        headers = find_headers()
        if headers is not None:
            out["cutlass"] = headers.version
        return out

    # ------------------------------------------------------------ helpers

    def _device_arch(self) -> str:
        import cupy

        return cutlass_arch(cupy.cuda.Device().compute_capability)

    def _build(self, source: str, kernel_name: str, arch: str, workdir: Path) -> Build:
        nvcc, headers = _nvcc(), find_headers()
        assert nvcc is not None and isinstance(headers, Headers)  # checked by missing()
        return build(
            source,
            kernel_name,
            arch,
            nvcc=nvcc,
            headers=headers,
            workdir=workdir,
            cache_dir=self.cache_dir,
            timeout_s=self.nvcc_timeout_s,
        )

    @staticmethod
    def _artifact(result: Build, arch: str) -> Artifact:
        assert result.image is not None and result.entry is not None
        abi = {"params": result.params}
        return Artifact.of("cutlass", "cubin", result.image, result.entry, arch=arch, abi=abi)


__all__ = ["CutlassBackend", "cutlass_arch"]
