"""Numba on the CPU: a learner's @numba.njit function, called with NumPy arrays.

Numba compiles lazily, for the argument types of the first call, so typing and
lowering errors surface in launch() and are reported as compile errors there.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from kplay.kernels.backends import pysource
from kplay.kernels.backends.base import (
    ArrayKind,
    Backend,
    Capability,
    CompiledKernel,
    LaunchSpec,
    register,
)
from kplay.kernels.models import CompileStage

_EXPECTED = "decorate it with @numba.njit (or @numba.jit(nopython=True)) so that Numba compiles it"


@lru_cache(maxsize=1)
def _numba_available() -> bool:
    try:
        import numba  # noqa: F401
    except Exception:  # a broken install counts as absent, whatever it raises
        return False
    return True


_version = pysource.version


def _compiler() -> str:
    return f"numba {_version('numba') or '?'}"


class NumbaCpuKernel(CompiledKernel):
    def __init__(self, dispatcher: Any, path: Path, name: str) -> None:
        self.dispatcher = dispatcher
        self.path = path
        self.name = name
        self.launched = False
        self.parallel = bool(dispatcher.targetoptions.get("parallel"))

    @property
    def threads(self) -> int:
        """Threads a launch may use: Numba's pool for parallel=True, else one.

        Read at the time of asking, since the harness may change the pool size.
        """
        if not self.parallel:
            return 1
        import numba

        return int(numba.get_num_threads())

    def launch(self, args: list[Any], spec: LaunchSpec) -> None:
        from numba.core.errors import NumbaError

        try:
            self.dispatcher(*args)
        except NumbaError as exc:
            raise pysource.numba_error(exc, self.path, _compiler()) from None
        self.launched = True

    def parameters(self) -> list[str] | None:
        return pysource.parameter_names(self.dispatcher)

    def report(self) -> CompileStage | None:
        if not self.launched:
            return None
        signatures = "; ".join(
            "(" + ", ".join(str(t) for t in sig) + ")" for sig in self.dispatcher.signatures
        )
        mode = f"parallel=True, {self.threads} threads" if self.parallel else "one thread"
        log = f"compiled {self.name}{'' if not signatures else f' for {signatures}'} ({mode})"
        return CompileStage(ok=True, log=log, compiler=_compiler())


@register
class NumbaCpuBackend(Backend):
    key = "numba-cpu"
    title = "Numba (CPU)"
    language = "python"

    def capability(self) -> Capability:
        return Capability.run if _numba_available() else Capability.unavailable

    def array_kind(self) -> ArrayKind:
        return ArrayKind.numpy

    def compile(
        self, source: str, kernel_name: str, workdir: Path
    ) -> tuple[CompileStage, CompiledKernel | None]:
        compiler = _compiler()
        found = pysource.load_kernel(source, kernel_name, workdir, compiler, _check_kind)
        if isinstance(found, CompileStage):
            return found, None
        loaded, obj = found
        stage = CompileStage(
            ok=True,
            log=f"loaded {kernel_name}; Numba compiles it at the first call, for its arguments",
            compiler=compiler,
            duration_ms=loaded.load_ms,
        )
        return stage, NumbaCpuKernel(obj, loaded.path, kernel_name)

    def versions(self) -> dict[str, str]:
        found = {d: _version(d) for d in ("numba", "llvmlite", "numpy")}
        return {k: v for k, v in found.items() if v}


def _check_kind(name: str, obj: Any, compiler: str) -> CompileStage | None:
    """None when `obj` is a Numba CPU dispatcher in nopython mode, else a diagnostic."""
    from numba.core.registry import CPUDispatcher

    if isinstance(obj, CPUDispatcher):
        if obj.targetoptions.get("forceobj"):
            message = (
                f"{name} asks for object mode (forceobj=True), which runs as plain "
                "Python; use @numba.njit"
            )
            return pysource.failed_stage(
                message, line=pysource.definition_line(obj), compiler=compiler
            )
        return None
    kind = type(obj)
    if kind.__module__.startswith("numba.cuda") or "CUDA" in kind.__name__:
        message = (
            f"{name} is a Numba CUDA kernel (@cuda.jit); this backend runs on the CPU: "
            "use @numba.njit"
        )
        return pysource.failed_stage(message, line=pysource.definition_line(obj), compiler=compiler)
    return pysource.wrong_kind_stage(name, obj, _EXPECTED, compiler)
