"""CUDA C++ in two halves: NVRTC builds a cubin in the learner's box, the evaluator loads it.

The box compiles with NVRTC's own API (through CuPy's binding, as `RawModule` does) to a
cubin for the device's architecture, with the kernel named by a name expression so that
templates and `extern "C"` kernels are found alike, and reports the lowered symbol. The
evaluator loads that image with the driver (`RawModule(path=...)`) and launches it through
the same checked `CupyKernel` as before; nothing of the learner's runs in its process but
the kernel on the device.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from kplay.kernels.artifact import Artifact, Variant
from kplay.kernels.backends.base import Exporter
from kplay.kernels.backends.cuda_source import kernel_name_problem, not_found_message
from kplay.kernels.backends.toolkit_parse import parse_diagnostics
from kplay.kernels.backends.toolkit_run import KERNEL_FILE
from kplay.kernels.models import CompileStage, Diagnostic


class CudaExporter(Exporter):
    """One image serves every launch of a CUDA C++ kernel."""

    def __init__(self, artifact: Artifact, params: list[str] | None) -> None:
        self.artifact = artifact
        self._params = params

    def build(self, variant: Variant) -> Artifact:
        return self.artifact

    def parameters(self) -> list[str] | None:
        return self._params


def nvrtc_version() -> tuple[int, int]:
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    return int(major), int(minor)


def nvrtc_cubin(
    source: str, kernel_name: str, arch: str, options: tuple[str, ...]
) -> tuple[CompileStage, bytes | None, str | None]:
    """Compile with NVRTC to a cubin for `arch` (sm_XX); (stage, image, lowered name).

    Through cuda-bindings' NVRTC, which needs no GPU: the box may have none.
    """
    from cuda.bindings import nvrtc

    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    major, minor = nvrtc_version()
    compiler = f"nvrtc {major}.{minor} ({arch})"
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), KERNEL_FILE.encode(), 0, [], [])
    if err != ok:
        raise RuntimeError(f"NVRTC could not create a program: {err}")
    try:
        name = kernel_name.encode()
        nvrtc.nvrtcAddNameExpression(prog, name)
        opts = [o.encode() for o in (*options, f"-arch={arch}")]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        log = _log(nvrtc, prog)
        if err != ok:
            diags, mains = parse_diagnostics(log, source, kernel_name_problem(kernel_name))
            for main in mains:
                log = log.replace(main, KERNEL_FILE)
            if not any(d.severity == "error" for d in diags):
                diags.append(Diagnostic(message="NVRTC failed; see the log"))
            return CompileStage(ok=False, log=log, diagnostics=diags, compiler=compiler), None, None
        err, lowered = nvrtc.nvrtcGetLoweredName(prog, name)
        if err != ok or not lowered:
            message = not_found_message(kernel_name)
            stage = CompileStage(ok=False, log=message, diagnostics=[Diagnostic(message=message)])
            stage.compiler = compiler
            return stage, None, None
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        image = b" " * size
        (err,) = nvrtc.nvrtcGetCUBIN(prog, image)
        if err != ok:
            raise RuntimeError(f"NVRTC gave no cubin: {err}")
        stage = CompileStage(ok=True, log=log, compiler=compiler)
        return stage, image, lowered.decode()
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _log(nvrtc: Any, prog: Any) -> str:
    try:
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        text = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, text)
    except Exception:  # noqa: BLE001 - a log is a nicety
        return ""
    return text.rstrip(b"\x00").decode(errors="replace")


def load_cubin(artifact: Artifact, limits: Any) -> Any:
    """The loaded kernel of an artefact: a `CupyKernel` whose function came from the image."""
    import cupy

    from kplay.kernels.backends.cuda_kernel import CupyKernel

    if artifact.format != "cubin":
        raise ValueError(f"a CUDA C++ artefact is a cubin, not {artifact.format}")
    with tempfile.TemporaryDirectory(prefix="kplay-cubin-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(artifact.image())
        module = cupy.RawModule(path=str(path))
        function = module.get_function(artifact.entry)
    params = artifact.abi.get("params")
    names = [str(p) for p in params] if isinstance(params, list) else None
    kernel = CupyKernel(function, names, limits)
    kernel.module = module  # keeps the image loaded as long as the kernel lives
    return kernel
