"""The nvcc half of a CUDA C++ compile folded into the NVRTC half's stage."""

from __future__ import annotations

from typing import Any

from kplay.kernels.backends.cuda_source import kernel_base_name
from kplay.kernels.backends.toolkit_parse import ptx_entry_params
from kplay.kernels.models import CompileStage, Diagnostic, Resources


def _merge_report(
    stage: CompileStage, report: CompileStage | None, kernel: Any, kernel_name: str
) -> None:
    """Fold the nvcc report into the NVRTC stage of a run."""
    if report is not None and report.compiler:
        stage.compiler = f"{(stage.compiler or 'nvrtc').split(' (')[0]} + {report.compiler}"
    if not stage.ok:
        return
    if report is None or not report.ok:
        note = "no resource report: " + ("nvcc not found" if report is None else "nvcc failed")
        stage.diagnostics.append(Diagnostic(severity="note", message=note))
        if report is not None:
            stage.log = report.log
        stage.resources = [_function_resources(kernel)]
        return
    stage.diagnostics = [d for d in report.diagnostics if d.severity != "error"]
    stage.log, stage.resources = report.log, report.resources
    stage.ptx, stage.sass = report.ptx, report.sass
    if hasattr(kernel, "set_parameters") and kernel.parameters() is None and report.ptx:
        kernel.set_parameters(_ptx_parameters(report.ptx, kernel_name))


def _ptx_parameters(ptx: str, kernel_name: str) -> list[str] | None:
    """Placeholders for the kernel's parameters, counted in its PTX `.entry`."""
    base = kernel_base_name(kernel_name)
    for entry, count in ptx_entry_params(ptx).items():
        # extern "C" names stay as written; C++ names are mangled as _Z<length><name>...
        if entry == base or entry.startswith(f"_Z{len(base)}{base}"):
            return [f"param{i}" for i in range(count)]
    return None


def _function_resources(kernel: Any) -> Resources:
    """What the driver knows of a loaded kernel, when nvcc could not say more."""
    fn = kernel.function if kernel is not None else None
    return Resources(
        registers=getattr(fn, "num_regs", None),
        shared_bytes=getattr(fn, "shared_size_bytes", None),
        stack_frame_bytes=getattr(fn, "local_size_bytes", None),
        constant_bytes=getattr(fn, "const_size_bytes", None),
    )
