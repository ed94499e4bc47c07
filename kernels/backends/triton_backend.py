"""Triton: a learner's @triton.jit kernel, on a GPU or in Triton's interpreter.

On a machine without a GPU, kernels.hardware.prepare_cpu_fallbacks() sets
TRITON_INTERPRET=1 before Triton is imported; @triton.jit then returns an interpreted
function that runs on CPU torch tensors. Triton compiles at the first launch, so its
compilation errors surface in launch() and become compile errors there. The
interpreter runs the kernel as Python: the mistakes a GPU build rejects show up as
Python exceptions, and launch() reports those as compile errors too.

Triton reads a kernel's source with `inspect`, which is why the source is a real file.
"""

from __future__ import annotations

import inspect
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from kplay.kernels.artifact import Artifact
from kplay.kernels.backends import pysource
from kplay.kernels.backends.base import (
    ArrayKind,
    Backend,
    Capability,
    CompiledKernel,
    DeferredCompileError,
    Exporter,
    LaunchSpec,
    register,
)
from kplay.kernels.backends.triton_listings import (
    ListingBuild,
    ir_listings,
    launch_variant,
    plain_variant,
)
from kplay.kernels.hardware import has_cuda_gpu, prepare_cpu_fallbacks
from kplay.kernels.models import CompileStage, Resources

_EXPECTED = "decorate it with @triton.jit (import triton) to make it a Triton kernel"
# Python errors that, in the interpreter, stand for what Triton rejects when compiling.
_STATIC_ERRORS = (NameError, TypeError, AttributeError, ValueError)
_INTERP_NOTE = (
    "found by Triton's interpreter, which runs the kernel as Python; "
    "on a GPU, Triton reports this when it compiles the kernel"
)


def _interpreting() -> bool:
    prepare_cpu_fallbacks()
    try:
        from triton import knobs

        return bool(knobs.runtime.interpret)
    except (ImportError, AttributeError):  # older Triton reads the variable directly
        return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


_version = pysource.version


def _compiler() -> str:
    base = f"triton {_version('triton') or '?'}"
    return f"{base} (interpreter)" if _interpreting() else base


def _plain(value: Any) -> Any:
    """NumPy scalars as Python numbers: Triton types and specialises only those."""
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


def _is_constexpr(annotation: Any) -> bool:
    # tl.constexpr itself, or its spelling under `from __future__ import annotations`.
    return annotation is not inspect.Parameter.empty and "constexpr" in str(annotation)


class TritonKernel(CompiledKernel):
    def __init__(self, kernel: Any, path: Path, name: str, interpreted: bool, source: str) -> None:
        self.kernel = kernel
        self.path = path
        # Kept in memory: a warm worker may reuse this kernel after its folder is gone.
        self.source = source
        self.name = name
        self.interpreted = interpreted
        self.compiled: Any = None  # what the largest GPU launch compiled, for report()
        self.compiled_size = 0  # that launch's number of programs
        # Interpreted: a compile-only build for the listings, started at the first launch
        # whose integers Triton would not specialise (else at report(), from the last).
        self.listing: ListingBuild | None = None
        self.last_variant: Any = None
        self.listed: CompileStage | None = None  # what the build gave, for a reused kernel
        self.build_listings = True  # off for a check-only run: nobody reads its listings
        # Meta-parameters an autotuner sets itself must not be passed again at launch.
        configs = getattr(kernel, "configs", None) or []
        self.autotuned = bool(configs)
        self.tuned_names = {k for c in configs for k in getattr(c, "kwargs", {})}
        # The autotuner benchmarks through a GPU driver, which the interpreter lacks: there,
        # the kernel under it runs with the first config's meta-parameters.
        self.interp_target = kernel
        self.interp_defaults: dict[str, Any] = {}
        if interpreted and configs:
            self.interp_target = kernel.fn
            self.interp_defaults = dict(getattr(configs[0], "kwargs", {}))

    def launch(self, args: list[Any], spec: LaunchSpec) -> None:
        grid = tuple(int(g) for g in spec.grid) or (1,)
        kwargs = {k: _plain(v) for k, v in spec.constants.items() if k not in self.tuned_names}
        # The interpreter has no warps or pipeline stages; an autotuner picks its own.
        if not self.interpreted and not self.autotuned:
            if spec.num_warps is not None:
                kwargs["num_warps"] = int(spec.num_warps)
            if spec.num_stages is not None:
                kwargs["num_stages"] = int(spec.num_stages)
        plain = [_plain(a) for a in args]
        if self.interpreted:
            self._interpreted_call(grid, plain, kwargs)
            started = self.listing is not None or self.listed is not None
            wanted = self.build_listings and not started
            if wanted and (variant := launch_variant(plain, spec)) is not None:
                self.last_variant = variant
                if plain_variant(variant):
                    self.listing = ListingBuild(self.source, self.name, self.path.parent, variant)
            return

        try:
            result = self.kernel[grid](*plain, **kwargs)
        except Exception as exc:
            raise compile_failure(exc, self.path, self.source) from None
        # The report describes the build of the largest launch so far: the first launch is
        # usually the smallest case, and Triton specialises on its integers (M=1, sizes not
        # divisible by 16), so its registers and listings can differ from the timed build's.
        size = math.prod(grid)
        if hasattr(result, "asm") and (self.compiled is None or size > self.compiled_size):
            self.compiled, self.compiled_size = result, size

    def _interpreted_call(self, grid: tuple[int, ...], args: list[Any], kwargs: dict) -> None:
        from triton.compiler.errors import CompilationError
        from triton.runtime.errors import InterpreterError

        # The interpreter takes a bool argument for a 32-bit array and refuses it (int1);
        # compiled Triton takes it as an i1. An int of the same value means the same.
        args = [int(a) if isinstance(a, bool | np.bool_) else a for a in args]
        try:
            self.interp_target[grid](*args, **{**self.interp_defaults, **kwargs})
        except InterpreterError as exc:
            # A call into a @triton.jit helper wraps the helper's error once more.
            chain = pysource.exception_chain(exc)
            cause = next((e for e in chain if not isinstance(e, InterpreterError)), exc)
            if isinstance(cause, CompilationError):
                raise _compilation_error(cause, self.path, self.source, _INTERP_NOTE) from None
            if isinstance(cause, _STATIC_ERRORS):
                raise pysource.deferred_error(
                    cause, self.path, _compiler(), note=_INTERP_NOTE
                ) from None
            raise cause from None  # a runtime fault: its own type and traceback say more

    def parameters(self) -> list[str] | None:
        fn = pysource.python_function(self.kernel)
        if fn is None:
            return None
        params = inspect.signature(fn).parameters.values()
        return [p.name for p in params if not _is_constexpr(p.annotation)]

    def report(self) -> CompileStage | None:
        if self.interpreted:
            return self._listings()
        if self.compiled is None:
            return None
        return _gpu_report(self.compiled, self.name)

    def _listings(self) -> CompileStage | None:
        """The compile-only build's stage, collected once (a warm worker reuses kernels)."""
        if self.build_listings and self.listed is None and self.last_variant is not None:
            folder = self.path.parent
            build = self.listing or ListingBuild(self.source, self.name, folder, self.last_variant)
            self.listed, self.listing, self.last_variant = build.finish(), None, None
        return None if self.listed is None else self.listed.model_copy(deep=True)


def compile_failure(exc: Exception, path: Path, source: str) -> Exception:
    """What a Triton compile that failed raises: the learner's error, located, or `exc`."""
    from triton.compiler.errors import CompilationError

    if isinstance(exc, CompilationError):
        return _compilation_error(exc, path, source)
    if type(exc).__name__ in ("OutOfResources", "PTXASError"):
        return pysource.deferred_error(exc, path, _compiler())
    return exc


def _compilation_error(
    exc: BaseException, path: Path, source: str, note: str | None = None
) -> DeferredCompileError:
    """Triton's CompilationError, located in the learner's file.

    Its node's line counts from the `def` of the function being compiled. A failure in
    a called @triton.jit helper is wrapped in one for the call site, so the innermost
    error of the chain is the precise one.
    """
    from triton.compiler.errors import CompilationError

    chain = [e for e in pysource.exception_chain(exc) if isinstance(e, CompilationError)]
    inner = chain[-1] if chain else exc
    line = _file_line(inner, source)
    detail = getattr(inner, "error_message", None) or str(inner).strip().splitlines()[-1]
    message = f"{type(inner).__name__}: {pysource.clean_message(str(detail))}"
    return pysource.deferred_error(exc, path, _compiler(), message=message, line=line, note=note)


def _file_line(err: BaseException, source: str) -> int | None:
    """The line of `source` where a CompilationError points.

    The error holds the failing function's own source, from its `def`, and a line
    number within it; finding that `def` in the file gives the offset.
    """
    node_line = getattr(getattr(err, "node", None), "lineno", None)
    src = getattr(err, "src", None)
    if not node_line or not src or not src.strip():
        return None
    first = src.strip().splitlines()[0].strip()
    lines = source.splitlines()
    def_index = next((i for i, text in enumerate(lines) if text.strip() == first), None)
    return None if def_index is None else def_index + node_line


def _gpu_report(compiled: Any, name: str) -> CompileStage:
    """Registers, spills, shared memory, PTX and SASS of the kernel compiled at first launch."""
    metadata = getattr(compiled, "metadata", None)
    target = getattr(metadata, "target", None)
    arch = getattr(target, "arch", None)
    n_spills = getattr(compiled, "n_spills", None)
    resources = Resources(
        kernel=getattr(metadata, "name", None) or name,
        registers=getattr(compiled, "n_regs", None),
        shared_bytes=getattr(metadata, "shared", None),
        # The driver reports local memory per thread; Triton stores it in 4-byte words.
        stack_frame_bytes=None if n_spills is None else int(n_spills) * 4,
        arch=f"sm_{arch}" if isinstance(arch, int) else (str(arch) if arch else None),
    )
    asm = getattr(compiled, "asm", {}) or {}
    notes = [
        f"{name}: {resources.registers} registers per thread",
        f"num_warps={getattr(metadata, 'num_warps', '?')}",
        f"num_stages={getattr(metadata, 'num_stages', '?')}",
    ]
    ptx = asm.get("ptx")
    sass = None
    try:  # Triton disassembles the cubin on demand, with the tools it ships
        sass = asm["sass"]
    except Exception as exc:
        notes.append(f"SASS unavailable: {type(exc).__name__}: {exc}")
    return CompileStage(
        ok=True,
        log="; ".join(notes),
        resources=[resources],
        ptx=ptx if isinstance(ptx, str) else None,
        sass=sass if isinstance(sass, str) else None,
        ir=ir_listings(asm),
        compiler=_compiler(),
    )


@register
class TritonBackend(Backend):
    key = "triton"
    title = "Triton"
    language = "python"

    def capability(self) -> Capability:
        interpreting = _interpreting()
        try:
            import torch
            import triton  # noqa: F401
        except Exception:  # not installed, or a broken install
            return Capability.unavailable
        if interpreting:
            return Capability.simulate
        if has_cuda_gpu() and torch.cuda.is_available():
            return Capability.run
        return Capability.unavailable

    def array_kind(self) -> ArrayKind:
        if self.capability() is Capability.run:
            return ArrayKind.torch_cuda
        return ArrayKind.torch_cpu

    def compile(
        self, source: str, kernel_name: str, workdir: Path
    ) -> tuple[CompileStage, CompiledKernel | None]:
        interpreted = _interpreting()  # switches the interpreter on before `import triton`
        compiler = _compiler()
        found = pysource.load_kernel(source, kernel_name, workdir, compiler, _check_kind)
        if isinstance(found, CompileStage):
            return found, None
        loaded, obj = found
        when = "runs it in the interpreter" if interpreted else "compiles it at the first launch"
        stage = CompileStage(
            ok=True,
            log=f"loaded {kernel_name}; Triton {when}",
            compiler=compiler,
            duration_ms=loaded.load_ms,
        )
        return stage, TritonKernel(obj, loaded.path, kernel_name, interpreted, source)

    def exports(self) -> bool:
        return self.capability() is Capability.run

    def export(
        self, source: str, kernel_name: str, workdir: Path
    ) -> tuple[CompileStage, Exporter | None]:
        """Load the learner's module; the exporter compiles a cubin per launch variant."""
        from kplay.kernels.backends.image_launch import target_cc
        from kplay.kernels.backends.triton_artifact import TritonExporter

        if _interpreting():
            raise RuntimeError("Triton's interpreter is on in this process: no images")
        compiler = _compiler()
        found = pysource.load_kernel(source, kernel_name, workdir, compiler, _check_kind)
        if isinstance(found, CompileStage):
            return found, None
        loaded, obj = found
        cc = target_cc(self.target_cc)
        exporter = TritonExporter(obj, loaded.path, kernel_name, source, cc)
        stage = CompileStage(
            ok=True,
            log=f"loaded {kernel_name}; Triton compiles it for sm_{cc[0]}{cc[1]} per variant",
            compiler=compiler,
            duration_ms=loaded.load_ms,
        )
        return stage, exporter

    def load(self, artifact: Artifact) -> CompiledKernel:
        from kplay.kernels.backends.triton_image import TritonImageKernel

        return TritonImageKernel(artifact)

    def versions(self) -> dict[str, str]:
        found = {d: _version(d) for d in ("triton", "torch", "numpy")}
        return {k: v for k, v in found.items() if v}


def _check_kind(name: str, obj: Any, compiler: str) -> CompileStage | None:
    """None for a @triton.jit kernel (possibly under autotune or heuristics)."""
    from triton.runtime.jit import KernelInterface

    if isinstance(obj, KernelInterface):
        return None
    if type(obj).__module__.startswith("numba"):
        message = f"{name} is a Numba function; this backend runs Triton kernels: use @triton.jit"
        return pysource.failed_stage(message, line=pysource.definition_line(obj), compiler=compiler)
    return pysource.wrong_kind_stage(name, obj, _EXPECTED, compiler)
