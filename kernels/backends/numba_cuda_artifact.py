"""Numba CUDA kernels as images: built in the learner's box, launched by the evaluator.

In the box, `NumbaCudaExporter.build(variant)` compiles the kernel's Python function
with numba-cuda's `compile_ptx`, for the variant's argument types as Numba's dispatcher
types them at a launch (a CuPy array is `Array(dtype, ndim, 'C')`, a NumPy scalar its
own type) and for the target's compute capability, with the kernel's own options
(fastmath, lineinfo, debug, opt, launch bounds, max_registers). ptxas then assembles the
PTX into a cubin, which also gives the resource report. Where no ptxas takes this PTX
(none installed, or each one older than the NVVM that wrote it), the PTX itself is the
image and the driver compiles it when the evaluator loads it.

Numba's kernel ABI flattens every argument into kernel parameters. An array becomes
meminfo and parent pointers (null when launched from the host), nitems, itemsize, the
data pointer, shape[ndim] and strides[ndim] in bytes, all 64-bit; a scalar is one
parameter of its own type, a complex number two (real, imaginary). The artefact's
`abi["params"]` lists every parameter with the argument and the field it comes from and
its NumPy type, checked one for one against the PTX `.entry`, so that the loader
(`NumbaImageKernel`) packs exactly that list and guesses nothing.
"""

from __future__ import annotations

import inspect
import time
from pathlib import Path
from typing import Any

import numpy as np

from kplay.kernels.artifact import Artifact, Variant
from kplay.kernels.backends import pysource
from kplay.kernels.backends.base import (
    CompiledKernel,
    DeferredCompileError,
    Exporter,
    KernelError,
    LaunchSpec,
)
from kplay.kernels.backends.image_launch import (
    LoadedImage,
    check_layout,
    device_pointer,
    ptx_entry,
    ptx_target,
    scalar,
)
from kplay.kernels.backends.toolkit_find import find_tool, pip_cuda_roots
from kplay.kernels.backends.toolkit_parse import parse_ptxas, truncate
from kplay.kernels.backends.toolkit_run import TEXT_LIMIT_BYTES, disassemble, run_tool
from kplay.kernels.models import CompileStage, Resources

BACKEND = "numba-cuda"
CONVENTION = "numba-cuda/1"
_ARRAY_HEAD = (("meminfo", "uint64"), ("parent", "uint64"), ("nitems", "int64"),
               ("itemsize", "int64"), ("data", "uint64"))  # fmt: skip
# The dispatcher's options that compile_ptx takes too.
_OPTIONS = ("debug", "lineinfo", "fastmath", "opt", "launch_bounds", "forceinline")
# ptxas messages that say the tool is too old for this PTX, not that the kernel is wrong.
_TOO_OLD = ("Unsupported .version", "is not defined for option", "Unknown option")
PTXAS_TIMEOUT_S = 120.0


def numba_types(variant: Variant) -> tuple[Any, ...]:
    """The Numba types the dispatcher gives a launch's arguments (CuPy arrays, NumPy scalars)."""
    import numba
    from numba.core import types

    out = []
    for arg in variant.args:
        dtype = numba.from_dtype(np.dtype(arg.dtype))
        out.append(types.Array(dtype, arg.ndim, "C") if arg.kind == "array" else dtype)
    return tuple(out)


def flatten(argtypes: tuple[Any, ...]) -> list[dict[str, Any]]:
    """Every kernel parameter, in order: the argument and field it holds, its NumPy type."""
    from numba.core import types

    params: list[dict[str, Any]] = []
    for i, ty in enumerate(argtypes):
        if isinstance(ty, types.Array):
            params += [{"arg": i, "field": f, "ctype": c} for f, c in _ARRAY_HEAD]
            for field in ("shape", "strides"):
                params += [{"arg": i, "field": field, "dim": d, "ctype": "int64"}
                           for d in range(ty.ndim)]  # fmt: skip
        elif isinstance(ty, types.Complex):
            part = np.dtype(str(ty)).itemsize // 2
            ctype = f"float{8 * part}"
            params += [{"arg": i, "field": f, "ctype": ctype} for f in ("real", "imag")]
        elif isinstance(ty, types.Boolean):
            params.append({"arg": i, "field": "value", "ctype": "bool"})
        elif isinstance(ty, types.Integer | types.Float):
            params.append({"arg": i, "field": "value", "ctype": np.dtype(str(ty)).name})
        else:
            raise KernelError(
                f"argument {i + 1}: Numba type {ty} cannot be passed to a kernel here"
            )
    return params


class NumbaCudaExporter(Exporter):
    """The learner's @cuda.jit kernel, loaded in the box; one image per argument types."""

    def __init__(
        self, dispatcher: Any, path: Path, name: str, cc: tuple[int, int], workdir: Path,
        compiler: str,
    ) -> None:  # fmt: skip
        self.dispatcher = dispatcher
        self.path = path
        self.name = name
        self.cc = cc
        self.workdir = workdir
        self.compiler = compiler
        # SASS takes a disassembler run; only the first image's listing is ever shown.
        self.listed = False

    def parameters(self) -> list[str] | None:
        return pysource.parameter_names(self.dispatcher)

    def build(self, variant: Variant) -> Artifact:
        start = time.perf_counter()
        argtypes = self._argtypes(variant)
        ptx = self._ptx(argtypes)
        entry, sizes = ptx_entry(ptx)
        params = flatten(argtypes)
        check_layout([p["ctype"] for p in params], sizes, f"{self.name} ({entry})")
        arch = ptx_target(ptx) or f"sm_{self.cc[0]}{self.cc[1]}"
        folder = self.workdir / f"numba-{variant.key()}"
        cubin, log, resources = assemble(ptx, arch, folder, self._max_registers())
        for res in resources:
            res.kernel = self.name
        if resources:
            log = f"{self.name}: {resources[0].registers} registers per thread\n{log}"
        names = self.parameters() or [f"arg{i}" for i in range(len(argtypes))]
        abi = {
            "convention": CONVENTION,
            "parameters": names,
            "args": [
                {"name": n, "kind": a.kind, "dtype": a.dtype, "ndim": a.ndim, "numba": str(t)}
                for n, a, t in zip(names, variant.args, argtypes, strict=False)
            ],
            "params": params,
        }
        sass = None
        if cubin is not None and not self.listed:
            sass = disassemble(folder, None)
            self.listed = True
        stage = CompileStage(
            ok=True,
            log=log,
            resources=resources or [Resources(kernel=self.name, arch=arch)],
            ptx=truncate(ptx, TEXT_LIMIT_BYTES, "PTX"),
            sass=sass,
            compiler=self.compiler,
            duration_ms=(time.perf_counter() - start) * 1e3,
        )
        if cubin is not None:
            return Artifact.of(BACKEND, "cubin", cubin, entry, arch=arch, abi=abi, stage=stage)
        return Artifact.of(BACKEND, "ptx", ptx.encode(), entry, arch=arch, abi=abi, stage=stage)

    def _argtypes(self, variant: Variant) -> tuple[Any, ...]:
        ours = numba_types(variant)
        names = self.parameters()
        if names is not None and len(names) != len(ours):
            raise KernelError(
                f"{self.name} takes {len(names)} parameters ({', '.join(names)}); "
                f"the problem passes {len(ours)} arguments"
            )
        # A kernel compiled eagerly for declared signatures takes only those: the first
        # one a launch's arguments convert to, as the dispatcher would pick.
        declared = (
            [] if getattr(self.dispatcher, "_can_compile", True) else self.dispatcher.signatures
        )
        for sig in declared:
            if len(sig) == len(ours) and all(
                _converts(o, d) for o, d in zip(ours, sig, strict=True)
            ):
                return tuple(sig)
        if declared:
            raise KernelError(
                f"{self.name} has no signature for arguments ({', '.join(map(str, ours))})"
            )
        return ours

    def _ptx(self, argtypes: tuple[Any, ...]) -> str:
        from numba.core.errors import NumbaError

        try:
            from numba.cuda import compile_ptx
        except ImportError:  # pragma: no cover - numba-cuda always has it
            from numba.cuda.compiler import compile_ptx
        accepted = inspect.signature(compile_ptx).parameters
        options = getattr(self.dispatcher, "targetoptions", {}) or {}
        if options.get("link"):
            raise KernelError("kernels that link extra files (link=...) are not supported here")
        kwargs = {k: options[k] for k in _OPTIONS if k in options and k in accepted}
        try:
            ptx, _ = compile_ptx(self.dispatcher.py_func, argtypes, cc=self.cc, **kwargs)
        except NumbaError as exc:
            raise pysource.numba_error(exc, self.path, self.compiler) from None
        except Exception as exc:  # NVVM's errors and friends: the learner's kernel failed
            ptx = self._through_dispatcher(argtypes)
            if ptx is None:
                raise pysource.deferred_error(exc, self.path, self.compiler) from None
        return ptx

    def _through_dispatcher(self, argtypes: tuple[Any, ...]) -> str | None:
        """Numba's own compile for a launch, where the box sees the device it targets.

        On the H200 the three-pass softmax failed in `compile_ptx` ("Signature mismatch")
        where the same kernel compiles and runs when Numba launches it; this is the path
        Numba takes for a launch. None where it is not open (no device) or fails too.
        """
        try:
            from numba import cuda

            device = cuda.get_current_device()
            if tuple(device.compute_capability) != tuple(self.cc):
                return None
            kernel = self.dispatcher.compile(argtypes)
            return str(kernel.inspect_asm(tuple(device.compute_capability)))
        except Exception:  # noqa: BLE001 - the first error is the one reported
            return None

    def _max_registers(self) -> int | None:
        options = getattr(self.dispatcher, "targetoptions", {}) or {}
        value = options.get("max_registers")
        return int(value) if value else None


def _converts(ours: Any, declared: Any) -> bool:
    from numba.core import types

    if ours == declared:
        return True
    if isinstance(ours, types.Array) and isinstance(declared, types.Array):
        return (
            ours.dtype == declared.dtype and ours.ndim == declared.ndim and declared.layout == "A"
        )
    scalar_kinds = (types.Integer, types.Float, types.Boolean)
    return isinstance(ours, scalar_kinds) and isinstance(declared, scalar_kinds)


def _ptxas_candidates() -> list[Path]:
    """ptxas from the pip CUDA wheels first (numba-cuda takes its NVVM there first too)."""
    found = [r / "bin" / "ptxas" for r in pip_cuda_roots()]
    other = find_tool("ptxas")
    if other is not None:
        found.append(other)
    return [p for p in dict.fromkeys(found) if p.is_file()]


def assemble(
    ptx: str, arch: str, folder: Path, max_registers: int | None = None
) -> tuple[bytes | None, str, list[Resources]]:
    """The cubin of `ptx` for `arch`, the log and ptxas's resource report.

    (None, notes, []) when no ptxas here takes this PTX. A ptxas that rejects the kernel
    itself (too much shared memory, an unresolved function) is the learner's error.
    """
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.ptx").write_text(ptx)
    notes: list[str] = []
    for tool in _ptxas_candidates():
        cmd = [str(tool), f"-arch={arch}", "-v", "-o", "kernel.cubin", "kernel.ptx"]
        if max_registers:
            cmd[1:1] = [f"--maxrregcount={max_registers}"]
        result = run_tool(cmd, folder, PTXAS_TIMEOUT_S, "ptxas.log")
        log = result.output.replace(f"{folder}/", "")
        if result.returncode == 0:
            return (folder / "kernel.cubin").read_bytes(), log, parse_ptxas(log)
        if result.returncode is None or any(m in log for m in _TOO_OLD):
            notes.append(f"{tool}: {log.strip().splitlines()[-1] if log.strip() else 'failed'}")
            continue
        stage = pysource.failed_stage(f"ptxas rejected the kernel:\n{log.strip()}", log=log)
        raise DeferredCompileError(stage)
    notes.append("no ptxas took the PTX: the image is PTX, compiled by the driver at load")
    return None, "\n".join(notes), []


# ---------------------------------------------------------------- the evaluator's side


class NumbaImageKernel(CompiledKernel):
    """A Numba CUDA kernel image, launched on CuPy arrays and NumPy scalars.

    Launches go to CuPy's current stream, as the harness's own work does.
    """

    def __init__(self, artifact: Artifact) -> None:
        abi = artifact.abi
        if artifact.backend != BACKEND or abi.get("convention") != CONVENTION:
            raise KernelError(f"not a Numba CUDA kernel image ({artifact.backend})")
        self.args: list[dict[str, Any]] = list(abi["args"])
        self.params: list[dict[str, Any]] = list(abi["params"])
        for p in self.params:
            np.dtype(p["ctype"])  # refuses a type it does not know
            if not 0 <= int(p["arg"]) < len(self.args):
                raise KernelError("the image's parameters name an argument it does not have")
        self.names: list[str] | None = abi.get("parameters")
        self.image = LoadedImage(artifact.image(), artifact.format, artifact.entry)
        self.stage = artifact.stage

    def launch(self, args: list[Any], spec: LaunchSpec) -> None:
        if not spec.grid or not spec.block:
            raise KernelError("a Numba CUDA launch needs a grid and a block")
        if min(*spec.grid, *spec.block) < 1:
            raise KernelError(f"grid {spec.grid} and block {spec.block} must be positive")
        if len(args) != len(self.args):
            raise KernelError(f"the kernel takes {len(self.args)} arguments, got {len(args)}")
        for arg, want in zip(args, self.args, strict=True):
            if want["kind"] == "array":
                _check_array(arg, want)
        values = [_param(p, args[p["arg"]]) for p in self.params]
        self.image.launch(spec.grid, spec.block, values, int(spec.shared_mem_bytes))

    def parameters(self) -> list[str] | None:
        return self.names

    def report(self) -> CompileStage | None:
        return self.stage


def _check_array(arg: Any, want: dict[str, Any]) -> None:
    dtype = getattr(arg, "dtype", None)
    if dtype is None or np.dtype(dtype) != np.dtype(want["dtype"]) or arg.ndim != want["ndim"]:
        raise KernelError(
            f"{want['name']}: the image takes a {want['ndim']}-d {want['dtype']} array, "
            f"got {type(arg).__name__} {getattr(arg, 'dtype', '?')} "
            f"of {getattr(arg, 'ndim', '?')} dims"
        )
    flags = getattr(arg, "flags", None)
    if flags is not None and not flags.c_contiguous:
        raise KernelError(f"{want['name']}: the image takes C-contiguous arrays only")


def _param(p: dict[str, Any], arg: Any) -> Any:
    field, ctype = p["field"], p["ctype"]
    if field == "data":
        return np.uint64(device_pointer(arg))
    if field in ("meminfo", "parent"):
        return np.uint64(0)
    if field == "nitems":
        return np.int64(arg.size)
    if field == "itemsize":
        return np.int64(arg.itemsize)
    if field in ("shape", "strides"):
        return np.int64(getattr(arg, field)[p["dim"]])
    if field == "real":
        return scalar(ctype, np.real(arg))
    if field == "imag":
        return scalar(ctype, np.imag(arg))
    return scalar(ctype, arg)
