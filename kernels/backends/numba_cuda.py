"""Numba CUDA: a learner's @cuda.jit kernel, on a GPU or in Numba's CUDA simulator.

Which of the two `numba.cuda` is decided once per process, when it is first imported:
kernels.hardware.prepare_cpu_fallbacks() sets NUMBA_ENABLE_CUDASIM=1 on a machine without
a GPU, so nothing here imports numba.cuda before calling it.

On a GPU, Numba compiles at the first launch, for the argument types it sees; typing
and lowering errors surface in launch() and become compile errors there. The simulator
runs the kernel as Python, one thread per simulated CUDA thread, so the mistakes a GPU
build would reject (an unknown name, an operation on the wrong types) show up there as
Python exceptions instead; launch() reports those as compile errors too.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from kplay.kernels.artifact import Artifact
from kplay.kernels.backends import pysource
from kplay.kernels.backends.base import (
    ArrayKind,
    Backend,
    Capability,
    CompiledKernel,
    Exporter,
    KernelError,
    LaunchSpec,
    register,
)
from kplay.kernels.hardware import has_cuda_gpu, prepare_cpu_fallbacks
from kplay.kernels.models import CompileStage, Resources

_EXPECTED = "decorate it with @cuda.jit (from numba import cuda) to make it a CUDA kernel"
# Python errors that, in the simulator, stand for what Numba rejects when compiling.
_STATIC_ERRORS = (NameError, TypeError, AttributeError)
_SIM_NOTE = (
    "found by Numba's CUDA simulator, which runs the kernel as Python; "
    "on a GPU, Numba reports this when it compiles the kernel"
)
_THREAD_PREFIX = re.compile(r"^tid=\[[^\]]*\] ctaid=\[[^\]]*\]:?\s*")


def _prepare() -> None:
    """Environment for numba.cuda, set before its first import (its config reads it then).

    NUMBA_CUDA_ARRAY_INTERFACE_SYNC=0: without it Numba synchronises the stream that
    CuPy names in each array's __cuda_array_interface__, on every launch and for every
    array, a host round trip that would land inside the timed loop. Skipping it is safe
    here because the harness makes and fills its CuPy arrays on CuPy's default stream,
    which is the legacy default stream, and Numba launches on stream 0, that same
    stream: the kernel is ordered after the writes by the stream itself. Code that fills
    inputs on another stream must synchronise it before launch().
    """
    prepare_cpu_fallbacks()
    os.environ.setdefault("NUMBA_CUDA_ARRAY_INTERFACE_SYNC", "0")
    # Tests and small cases launch small grids on purpose; the warning is noise there.
    os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")


# Config attributes and the variables they are read from, applied again after import.
_SETTINGS = {
    "CUDA_ARRAY_INTERFACE_SYNC": "NUMBA_CUDA_ARRAY_INTERFACE_SYNC",
    "CUDA_LOW_OCCUPANCY_WARNINGS": "NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS",
}


def _cuda() -> ModuleType:
    _prepare()
    from numba import cuda

    # numba.cuda's config may have been read before _prepare() ran (another import got
    # there first); the variables are the source of truth either way.
    config = _config()
    for attr, var in _SETTINGS.items():
        if hasattr(config, attr) and os.environ.get(var, "").isdigit():
            setattr(config, attr, int(os.environ[var]))
    return cuda


def _config() -> Any:
    try:
        from numba.cuda.core import config  # numba-cuda keeps its own copy
    except ImportError:
        from numba.core import config
    return config


def _simulating() -> bool:
    _cuda()
    return bool(getattr(_config(), "ENABLE_CUDASIM", 0))


_version = pysource.version


def _compiler() -> str:
    base = f"numba-cuda {_version('numba-cuda') or _version('numba') or '?'}"
    return f"{base} (simulator)" if _simulating() else base


class NumbaCudaKernel(CompiledKernel):
    def __init__(self, dispatcher: Any, path: Path, name: str, simulated: bool) -> None:
        self.dispatcher = dispatcher
        self.path = path
        self.name = name
        self.simulated = simulated
        self.launched = False

    def launch(self, args: list[Any], spec: LaunchSpec) -> None:
        if not spec.grid or not spec.block:
            raise KernelError("a Numba CUDA launch needs a grid and a block")
        grid = tuple(int(g) for g in spec.grid)
        block = tuple(int(b) for b in spec.block)
        configured = self.dispatcher[grid, block, 0, int(spec.shared_mem_bytes)]
        if self.simulated:
            _simulated_call(configured, args, self.path)
        else:
            from numba.core.errors import NumbaError

            try:
                configured(*args)
            except NumbaError as exc:  # numba-cuda's own errors derive from this one
                raise pysource.numba_error(exc, self.path, _compiler()) from None
        self.launched = True

    def parameters(self) -> list[str] | None:
        return pysource.parameter_names(self.dispatcher)

    def report(self) -> CompileStage | None:
        if self.simulated or not self.launched:
            return None
        return _gpu_report(self.dispatcher, self.name)


def _simulated_call(configured: Any, args: list[Any], path: Path) -> None:
    """Run one simulated launch, turning Python errors that a GPU build rejects into
    compile errors.

    The simulator re-raises a thread's exception by rebuilding it from its message; for
    exception types whose constructor wants more than that (NumPy's ufunc errors), the
    rebuild itself fails, the thread dies silently and the launch looks successful. A
    thread excepthook catches those so that they are reported, not lost.
    """
    lost: list[BaseException] = []
    previous = threading.excepthook

    def keep(hook_args: threading.ExceptHookArgs) -> None:
        if hook_args.exc_value is not None:
            lost.append(hook_args.exc_value)

    threading.excepthook = keep
    try:
        configured(*args)
    except Exception as exc:
        _raise_simulated(exc, path)
    finally:
        threading.excepthook = previous
    if lost:
        # The failed rebuild's context is the learner's exception, traceback and all.
        _raise_simulated(lost[0].__context__ or lost[0], path)


def _raise_simulated(exc: BaseException, path: Path) -> None:
    from numba.core.errors import NumbaError

    if isinstance(exc, NumbaError):
        raise pysource.numba_error(exc, path, _compiler(), note=_SIM_NOTE) from None
    if isinstance(exc, _STATIC_ERRORS):
        text = _THREAD_PREFIX.sub("", str(exc))
        message = f"{type(exc).__name__}: {pysource.clean_message(text)}"
        raise pysource.deferred_error(
            exc, path, _compiler(), message=message, note=_SIM_NOTE
        ) from None
    raise exc


def _gpu_report(dispatcher: Any, name: str) -> CompileStage:
    """Registers, memory, PTX and SASS of the variant compiled at the first launch."""
    cuda = _cuda()
    overloads = list(dispatcher.overloads.values())
    if not overloads:
        return CompileStage(ok=True, log="no compiled variant to report", compiler=_compiler())
    kernel = overloads[-1]
    cc = cuda.get_current_device().compute_capability
    resources = Resources(
        kernel=name,
        registers=getattr(kernel, "regs_per_thread", None),
        shared_bytes=getattr(kernel, "shared_mem_per_block", None),
        stack_frame_bytes=getattr(kernel, "local_mem_per_thread", None),
        constant_bytes=getattr(kernel, "const_mem_size", None),
        arch=f"sm_{cc[0]}{cc[1]}",
    )
    notes: list[str] = []
    ptx = _guarded(lambda: kernel.inspect_asm(cc), "PTX", notes)
    sass = _guarded(kernel.inspect_sass, "SASS (needs nvdisasm)", notes)
    log = "; ".join([f"{name}: {resources.registers} registers per thread"] + notes)
    return CompileStage(
        ok=True, log=log, resources=[resources], ptx=ptx, sass=sass, compiler=_compiler()
    )


def _guarded(read: Any, what: str, notes: list[str]) -> str | None:
    # A listing that cannot be produced is a missing extra, never a failed run.
    try:
        text = read()
    except Exception as exc:
        notes.append(f"{what} unavailable: {type(exc).__name__}: {exc}")
        return None
    return text if isinstance(text, str) else None


@register
class NumbaCudaBackend(Backend):
    key = "numba-cuda"
    title = "Numba CUDA"
    language = "python"

    def capability(self) -> Capability:
        prepare_cpu_fallbacks()
        try:
            cuda = _cuda()
            simulating = _simulating()
        except Exception:  # no numba-cuda, or a broken CUDA install
            return Capability.unavailable
        if simulating:
            return Capability.simulate
        if has_cuda_gpu() and cuda.is_available():
            return Capability.run
        # A GPU-less process that imported numba.cuda before the simulator was switched on.
        return Capability.unavailable

    def array_kind(self) -> ArrayKind:
        return ArrayKind.cupy if self.capability() is Capability.run else ArrayKind.numpy

    def compile(
        self, source: str, kernel_name: str, workdir: Path
    ) -> tuple[CompileStage, CompiledKernel | None]:
        _prepare()  # before the learner's `from numba import cuda`
        compiler = _compiler()
        found = pysource.load_kernel(source, kernel_name, workdir, compiler, _check_kind)
        if isinstance(found, CompileStage):
            return found, None
        loaded, obj = found
        simulated = _simulating()
        when = "runs it in the simulator" if simulated else "compiles it at the first launch"
        stage = CompileStage(
            ok=True,
            log=f"loaded {kernel_name}; Numba {when}",
            compiler=compiler,
            duration_ms=loaded.load_ms,
        )
        return stage, NumbaCudaKernel(obj, loaded.path, kernel_name, simulated)

    def exports(self) -> bool:
        return self.capability() is Capability.run

    def export(
        self, source: str, kernel_name: str, workdir: Path
    ) -> tuple[CompileStage, Exporter | None]:
        """Load the learner's module; the exporter compiles a cubin per argument types."""
        from kplay.kernels.backends.image_launch import target_cc
        from kplay.kernels.backends.numba_cuda_artifact import NumbaCudaExporter

        _prepare()
        if _simulating():
            raise RuntimeError("numba.cuda is Numba's simulator in this process: no images")
        compiler = _compiler()
        found = pysource.load_kernel(source, kernel_name, workdir, compiler, _check_kind)
        if isinstance(found, CompileStage):
            return found, None
        loaded, obj = found
        cc = target_cc(self.target_cc)
        stage = CompileStage(
            ok=True,
            log=f"loaded {kernel_name}; Numba compiles it for sm_{cc[0]}{cc[1]} per argument types",
            compiler=compiler,
            duration_ms=loaded.load_ms,
        )
        return stage, NumbaCudaExporter(obj, loaded.path, kernel_name, cc, workdir, compiler)

    def load(self, artifact: Artifact) -> CompiledKernel:
        from kplay.kernels.backends.numba_cuda_artifact import NumbaImageKernel

        return NumbaImageKernel(artifact)

    def versions(self) -> dict[str, str]:
        found = {d: _version(d) for d in ("numba", "numba-cuda", "llvmlite", "numpy")}
        return {k: v for k, v in found.items() if v}


def _kernel_classes() -> tuple[type, ...]:
    classes: list[type] = []
    try:
        from numba.cuda.dispatcher import CUDADispatcher

        classes.append(CUDADispatcher)
    except ImportError:  # only the simulator's classes exist in a simulating process
        pass
    try:
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        classes.append(FakeCUDAKernel)
    except ImportError:
        pass
    return tuple(classes)


def _check_kind(name: str, obj: Any, compiler: str) -> CompileStage | None:
    """None when `obj` is a @cuda.jit kernel (real or simulated), else a diagnostic."""
    _cuda()
    line = pysource.definition_line(obj)
    if isinstance(obj, _kernel_classes()):
        if not _is_device_function(obj):
            return None
        message = (
            f"{name} is a device function (@cuda.jit(device=True)); a kernel launched "
            "from the host needs @cuda.jit without device=True"
        )
        return pysource.failed_stage(message, line=line, compiler=compiler)
    if type(obj).__name__ == "CPUDispatcher":
        message = (
            f"{name} is a Numba CPU function (@numba.njit); a CUDA kernel needs @cuda.jit "
            "(from numba import cuda)"
        )
        return pysource.failed_stage(message, line=line, compiler=compiler)
    return pysource.wrong_kind_stage(name, obj, _EXPECTED, compiler)


def _is_device_function(obj: Any) -> bool:
    if hasattr(obj, "targetoptions"):  # a real dispatcher
        return bool(obj.targetoptions.get("device"))
    return bool(getattr(obj, "_device", False))  # the simulator's stand-in
