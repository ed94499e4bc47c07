"""CUDA C++: compiled by NVRTC through CuPy and launched on a GPU; nvcc reports resources.

Two compilers see every submission. NVRTC (CuPy's `RawModule`) builds what runs, with
the kernel named by a name expression so that templates (`sgemm<64,64,8>`) and
`extern "C"` kernels are found the same way. nvcc (`-cubin -Xptxas -v -keep`) builds the
resource report, PTX and SASS in one call; without a GPU it is the only compiler, and
the backend is compile-only. The nvcc half is cached on disk by a hash of everything
that decides its output, and runs in the background while NVRTC compiles.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from kplay.kernels.artifact import Artifact
from kplay.kernels.backends.base import (
    ArrayKind,
    Backend,
    Capability,
    CompiledKernel,
    register,
)
from kplay.kernels.backends.cuda_artifact import (
    CudaExporter,
    load_cubin,
    nvrtc_cubin,
    nvrtc_version,
)
from kplay.kernels.backends.cuda_kernel import CupyKernel, _device_limits
from kplay.kernels.backends.cuda_report import _merge_report, _ptx_parameters
from kplay.kernels.backends.cuda_source import (
    kernel_base_name,
    kernel_name_problem,
    kernel_parameters,
    normalise_arch,
    not_found_message,
    runs_on,
)
from kplay.kernels.backends.toolkit_find import (
    find_cuda_include,
    find_tool,
    host_compiler,
    tool_version,
)
from kplay.kernels.backends.toolkit_parse import parse_diagnostics
from kplay.kernels.backends.toolkit_run import (
    KERNEL_FILE,
    NVCC_FLAGS,
    RunningTool,
    finish_nvcc,
    start_nvcc,
)
from kplay.kernels.hardware import has_cuda_gpu, version_text
from kplay.kernels.models import CompileStage, Diagnostic

NVCC_TIMEOUT_S = 60.0
# 3: SASS with the learner's lines that inlined each instruction (nvdisasm -gi, compacted)
_CACHE_FORMAT = "3"
_NVRTC_OPTIONS = ("-std=c++17", "--generate-line-info")


@lru_cache(maxsize=1)
def _cupy_available() -> bool:
    try:
        import cupy  # noqa: F401
    except Exception:  # a broken install (wrong CUDA) fails in many ways
        return False
    return True


@lru_cache(maxsize=1)
def _nvcc() -> Path | None:
    return find_tool("nvcc")


@dataclass
class _PendingReport:
    """The nvcc half of a compile: already known (cache, failure to start) or running."""

    stage: CompileStage | None = None
    running: RunningTool | None = None
    key: str = ""
    folder: Path = field(default_factory=Path)


@register
class CudaBackend(Backend):
    key = "cuda"
    title = "CUDA C++"
    language = "cpp"

    def __init__(
        self,
        arch: str | None = None,
        cache_dir: Path | None = None,
        nvcc_timeout_s: float = NVCC_TIMEOUT_S,
    ) -> None:
        from kplay.config import EngineSettings

        # The arch applies without a GPU; on a GPU the report is built for the device.
        self.arch = normalise_arch(arch or EngineSettings().cuda_arch)
        self.cache_dir = cache_dir or _default_cache_dir()
        self.nvcc_timeout_s = nvcc_timeout_s

    # ------------------------------------------------------------ protocol

    def capability(self) -> Capability:
        if has_cuda_gpu() and _cupy_available():
            return Capability.run
        if _nvcc() is not None and host_compiler() is not None:
            return Capability.compile_only
        return Capability.unavailable

    def array_kind(self) -> ArrayKind:
        return ArrayKind.cupy

    def compile(
        self, source: str, kernel_name: str, workdir: Path
    ) -> tuple[CompileStage, CompiledKernel | None]:
        started = time.perf_counter()
        cap = self.capability()
        if cap is Capability.unavailable:
            message = "CUDA C++ cannot be compiled here: no GPU with CuPy, and no nvcc found"
            return CompileStage(
                ok=False, log=message, diagnostics=[Diagnostic(message=message)]
            ), None
        arch = self._device_arch() if cap is Capability.run else self.arch
        wanted = _requested_arch(source)
        if wanted is not None and not runs_on(wanted, arch):
            cap, arch = Capability.compile_only, wanted  # built for its target, not run here
        elif wanted is not None:
            arch = wanted
        pending = self._start_report(source, kernel_name, arch, Path(workdir))
        if cap is Capability.compile_only:
            stage = self._finish_report(pending, source, kernel_name)
            assert stage is not None  # nvcc exists under compile-only
            stage.duration_ms = (time.perf_counter() - started) * 1000
            return stage, None
        stage, kernel = self._nvrtc(source, kernel_name, arch)
        report = self._finish_report(pending, source, kernel_name)
        _merge_report(stage, report, kernel, kernel_name)
        stage.duration_ms = (time.perf_counter() - started) * 1000
        return stage, kernel if stage.ok else None

    # ------------------------------------------------------------ in two halves

    def exports(self) -> bool:
        return self.capability() is Capability.run

    def export(
        self, source: str, kernel_name: str, workdir: Path
    ) -> tuple[CompileStage, CudaExporter | None]:
        """In the learner's box: NVRTC's cubin and the nvcc report, nothing loaded."""
        started = time.perf_counter()
        arch = normalise_arch(self.target_cc) if self.target_cc else self._device_arch()
        wanted = _requested_arch(source)
        if wanted is not None and not runs_on(wanted, arch):
            # Built for the target it names, with its report; nothing here can run it.
            stage = self._finish_report(
                self._start_report(source, kernel_name, wanted, Path(workdir)), source, kernel_name
            )
            if stage is None:
                return CompileStage(ok=False, log="nvcc not found"), None
            stage.duration_ms = (time.perf_counter() - started) * 1000
            return stage, None
        arch = wanted or arch
        pending = self._start_report(source, kernel_name, arch, Path(workdir))
        include = find_cuda_include(nvrtc_version(), _nvcc())
        options = _NVRTC_OPTIONS + include_options(include)
        stage, image, lowered = nvrtc_cubin(source, kernel_name, arch, options)
        report = self._finish_report(pending, source, kernel_name)
        _merge_report(stage, report, None, kernel_name)
        stage.duration_ms = (time.perf_counter() - started) * 1000
        if not stage.ok or image is None or lowered is None:
            return stage, None
        params = kernel_parameters(source, kernel_name)
        if params is None and stage.ptx:
            params = _ptx_parameters(stage.ptx, kernel_name)
        artifact = Artifact.of("cuda", "cubin", image, lowered, arch=arch, abi={"params": params})
        return stage, CudaExporter(artifact, params)

    def load(self, artifact: Artifact) -> CompiledKernel:
        """In the evaluator: the box's cubin, loaded by the driver, launched with checks."""
        import cupy

        return load_cubin(artifact, _device_limits(cupy.cuda.Device().id))

    def versions(self) -> dict[str, str]:
        out: dict[str, str] = {}
        nvcc = _nvcc()
        if nvcc is not None and (v := tool_version(nvcc)):
            out["nvcc"] = v
        if self.capability() is Capability.run:
            import cupy

            rt = cupy.cuda.runtime
            out["cupy"] = cupy.__version__
            out["cuda_runtime"] = version_text(rt.runtimeGetVersion())
            out["cuda_driver"] = version_text(rt.driverGetVersion())
            out["nvrtc"] = "{}.{}".format(*cupy.cuda.nvrtc.getVersion())
        return out

    # ------------------------------------------------------------ NVRTC

    def _device_arch(self) -> str:
        import cupy

        return normalise_arch(cupy.cuda.Device().compute_capability)

    def _nvrtc(self, source: str, kernel_name: str, arch: str) -> tuple[CompileStage, Any]:
        import cupy

        nvrtc_version = cupy.cuda.nvrtc.getVersion()
        include = find_cuda_include(nvrtc_version, _nvcc())
        options = _NVRTC_OPTIONS + include_options(include)
        if arch[-1] in "af":  # CuPy builds for the device's plain target unless told
            options += (f"-arch={arch}",)
        compiler = f"nvrtc {nvrtc_version[0]}.{nvrtc_version[1]} ({arch})"
        try:
            module = cupy.RawModule(
                code=source, options=options, name_expressions=[kernel_name], backend="nvrtc"
            )
            function = module.get_function(kernel_name)  # compiles and loads
        except cupy.cuda.compiler.CompileException as exc:
            log = exc.get_message()
            diags, mains = parse_diagnostics(log, source, kernel_name_problem(kernel_name))
            for name in mains:
                log = log.replace(name, KERNEL_FILE)
            # CuPy names its temporary file after a hash: <tmp>/<hash>.cubin.cu
            log = re.sub(r'[^\s"]*\.cubin\.cu\b', KERNEL_FILE, log)
            if not any(d.severity == "error" for d in diags):
                diags.append(Diagnostic(message="NVRTC failed; see the log"))
            return CompileStage(ok=False, log=log, diagnostics=diags, compiler=compiler), None
        except Exception as exc:  # module load or symbol lookup, after a clean compile
            missing = isinstance(exc, KeyError) or "not found" in str(exc).lower()
            message = not_found_message(kernel_name) if missing else f"loading failed: {exc}"
            diag = Diagnostic(message=message)
            return CompileStage(ok=False, log=str(exc), diagnostics=[diag], compiler=compiler), None
        limits = _device_limits(cupy.cuda.Device().id)
        kernel = CupyKernel(function, kernel_parameters(source, kernel_name), limits)
        return CompileStage(ok=True, compiler=compiler), kernel

    # ------------------------------------------------------------ nvcc report

    def _report_key(self, source: str, kernel_name: str, arch: str, nvcc: Path) -> str:
        digest = hashlib.sha256()
        parts = (_CACHE_FORMAT, source, kernel_name, arch, str(nvcc), tool_version(nvcc) or "")
        for part in (*parts, " ".join(NVCC_FLAGS)):
            digest.update(part.encode() + b"\0")
        return digest.hexdigest()

    def _start_report(
        self, source: str, kernel_name: str, arch: str, workdir: Path
    ) -> _PendingReport:
        nvcc = _nvcc()
        if nvcc is None:
            return _PendingReport()
        key = self._report_key(source, kernel_name, arch, nvcc)
        cached = self._cache_load(key)
        if cached is not None:
            return _PendingReport(stage=cached)
        folder = (workdir / "nvcc").resolve()
        # A host-side reference makes nvcc instantiate and emit the kernel, as a name
        # expression does for NVRTC. It sits past the learner's last line.
        reference = f"\nvoid* kplay_kernel_reference_ = (void*)&{kernel_name};\n"
        full = source.rstrip("\n") + "\n" + reference
        try:
            running = start_nvcc(nvcc, full, arch, folder, self.nvcc_timeout_s)
        except OSError as exc:
            diag = Diagnostic(message=f"could not start nvcc: {exc}")
            return _PendingReport(stage=CompileStage(ok=False, log=str(exc), diagnostics=[diag]))
        return _PendingReport(running=running, key=key, folder=folder)

    def _finish_report(
        self, pending: _PendingReport, source: str, kernel_name: str
    ) -> CompileStage | None:
        if pending.running is None:
            return pending.stage
        base, about = kernel_base_name(kernel_name), kernel_name_problem(kernel_name)
        stage = finish_nvcc(pending.running, pending.folder, source, base, about)
        if not any("did not finish" in d.message for d in stage.diagnostics):
            self._cache_store(pending.key, stage)
        return stage

    # ------------------------------------------------------------ cache

    def _cache_load(self, key: str) -> CompileStage | None:
        try:
            return CompileStage.model_validate_json((self.cache_dir / f"{key}.json").read_text())
        except (OSError, ValueError):
            return None

    def _cache_store(self, key: str, stage: CompileStage) -> None:
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = self.cache_dir / f".{key}.{os.getpid()}.tmp"
            tmp.write_text(stage.model_dump_json())
            os.replace(tmp, self.cache_dir / f"{key}.json")
        except OSError:
            pass  # a read-only cache costs speed, never a result


def _default_cache_dir() -> Path:
    from kplay.config import EngineSettings

    return EngineSettings().cache_root() / "cuda"


__all__ = [
    "CudaBackend",
    "CupyKernel",
    "kernel_base_name",
    "kernel_name_problem",
    "kernel_parameters",
    "normalise_arch",
    "not_found_message",
]


def _requested_arch(source: str) -> str | None:
    # kernels.launch imports the backends' package, which imports this module: late.
    from kplay.kernels.launch import requested_arch

    return requested_arch(source)


def include_options(include: Path | None) -> tuple[str, ...]:
    """NVRTC's -I options for a CUDA include folder, with its CCCL headers (cuda/std/...,
    which cooperative_groups and cuda/barrier need) where CUDA 13 keeps them apart."""
    if include is None:
        return ()
    cccl = include / "cccl"
    return (f"-I{include}", f"-I{cccl}") if (cccl / "cuda" / "std").is_dir() else (f"-I{include}",)
