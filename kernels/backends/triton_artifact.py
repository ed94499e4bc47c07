"""Triton kernels as images, built in the learner's box (the evaluator's side: triton_image).

`TritonExporter.build(variant)` does what Triton's own launcher does at a first launch,
then stops before launching: it binds stand-ins for the variant's arguments (arrays as
addresses with their dtype, 256-byte aligned as the harness allocates them; scalars with
their values) through Triton's binder, so the specialisation is Triton's own (integers
equal to 1 become constants, integers and pointers divisible by 16 are marked so, Python
floats are fp32), adds the variant's constexprs, num_warps and num_stages, and compiles
with `triton.compile(ASTSource(...), target=GPUTarget("cuda", cc, 32))`. The image is the
cubin, its entry the metadata's name.

The kernel's parameters are the arguments that survive specialisation (constexprs and
integers specialised to 1 are gone), in order, then the scratch pointers recent Tritons
append (global scratch, then profile scratch); `abi["params"]` lists them one for one
against the PTX `.entry`. The rest of the abi is what Triton's launcher reads from the
metadata: warps, CTAs, dynamic shared memory, scratch sizes and alignment.

Autotuned kernels (`@triton.autotune`) get one image per config (its kwargs as
constexprs, its num_warps and num_stages), all carried in `abi["autotune"]`; the loaded
kernel times them at its first launch. `@triton.heuristics` values are computed here,
where learner code may run, from the variant's scalars and constants.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from kplay.kernels.artifact import ArgSpec, Artifact, Variant
from kplay.kernels.backends import pysource
from kplay.kernels.backends.base import DeferredCompileError, Exporter, KernelError
from kplay.kernels.backends.image_launch import check_layout, ptx_entry, ptx_target
from kplay.kernels.backends.toolkit_parse import truncate
from kplay.kernels.backends.toolkit_run import TEXT_LIMIT_BYTES
from kplay.kernels.backends.triton_backend import _compiler, _is_constexpr, compile_failure
from kplay.kernels.backends.triton_listings import ir_listings
from kplay.kernels.models import CompileStage, Resources

BACKEND = "triton"
CONVENTION = "triton/1"
ALIGNMENT = 256  # what the harness's allocations are aligned to
AUTOTUNE_WARMUP = 1
AUTOTUNE_REPS = 5
# Triton's scalar types and pointers as NumPy types of the same size ("bfloat16": bits).
_CTYPES = {"i1": "int8", "u1": "uint8", "i8": "int8", "i16": "int16", "i32": "int32",
           "i64": "int64", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
           "fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "f32": "float32",
           "fp64": "float64"}  # fmt: skip
_SCRATCH = ("global_scratch", "profile_scratch")
# Array types Triton names otherwise than NumPy (ml_dtypes) does.
_TL_NAMES = {"bool": "int1", "float8_e4m3fn": "float8e4nv", "float8_e5m2": "float8e5"}
# Integers Triton does not specialise, for a scalar whose value the variant leaves out.
_PLAIN_INT = {1: 3, 2: 3, 4: 3, 8: 2**33 + 3}


class _Pointer:
    """An array as Triton's specialisation sees it: a dtype and an address."""

    def __init__(self, dtype: Any) -> None:
        self.dtype = dtype

    def data_ptr(self) -> int:
        return ALIGNMENT


def stand_in(arg: ArgSpec) -> Any:
    """What the launcher would be handed for `arg`, as far as specialising goes."""
    import triton.language as tl

    if arg.kind == "array":
        name = _TL_NAMES.get(arg.dtype, arg.dtype)
        dtype = getattr(tl, name, None)
        if not isinstance(dtype, tl.dtype):
            raise KernelError(f"Triton has no type for {arg.dtype} arrays")
        return _Pointer(dtype)
    kind = np.dtype(arg.dtype).kind
    if kind == "b":
        return bool(arg.value)
    if kind in "iu":
        size = np.dtype(arg.dtype).itemsize
        return int(arg.value) if arg.value is not None else _PLAIN_INT[size]
    return float(arg.value) if arg.value is not None else 0.5


def unwrap(obj: Any) -> tuple[Any, list[dict[str, Any]], Any]:
    """(the @triton.jit function, heuristics outermost first, the autotuner or None)."""
    from triton.runtime.jit import JITFunction

    heuristics: list[dict[str, Any]] = []
    tuner = None
    for _ in range(8):
        if isinstance(obj, JITFunction):
            return obj, heuristics, tuner
        if tuner is None and getattr(obj, "configs", None) is not None:
            tuner = obj
        elif isinstance(getattr(obj, "values", None), dict):
            heuristics.append(obj.values)
        else:
            break
        obj = obj.fn
    raise KernelError(f"{type(obj).__name__}: not a @triton.jit kernel under its decorators")


class TritonExporter(Exporter):
    def __init__(
        self, kernel: Any, path: Path, name: str, source: str, cc: tuple[int, int]
    ) -> None:
        from triton.backends.compiler import GPUTarget

        self.kernel = kernel
        self.jit, self.heuristics, self.tuner = unwrap(kernel)
        self.path = path
        self.name = name
        self.source = source
        self.target = GPUTarget("cuda", cc[0] * 10 + cc[1], 32)
        # SASS takes a disassembler run; only the first image's listing is ever shown.
        self.listed = False

    def parameters(self) -> list[str] | None:
        return [p.name for p in self.jit.params if not _is_constexpr(p.annotation)]

    def build(self, variant: Variant) -> Artifact:
        if self.tuner is None:
            return self.build_one(variant, None)
        built: list[Artifact] = []
        failures: list[Exception] = []
        for config in self.tuner.configs:
            if (getattr(config, "num_ctas", 1) or 1) > 1:
                failures.append(KernelError("a config with num_ctas > 1 needs a cluster launch"))
                continue
            try:
                built.append(self.build_one(variant, config))
            except DeferredCompileError as exc:  # Triton's autotuner skips such configs too
                failures.append(exc)
        if not built:
            raise failures[0]
        names = [p.name for p in self.jit.params[: len(variant.args)]]
        first = built[0].model_copy(deep=True)
        first.abi["autotune"] = {
            "configs": [_lean(a).model_dump(mode="json") for a in built],
            "reset_to_zero": [names.index(n) for n in self.tuner.reset_to_zero if n in names],
            "restore_value": [names.index(n) for n in self.tuner.restore_value if n in names],
            "warmup": AUTOTUNE_WARMUP,
            "reps": AUTOTUNE_REPS,
        }
        if first.stage is not None:
            skipped = f"; {len(failures)} skipped" if failures else ""
            first.stage.log += (
                f"\nautotune: {len(built)} configs built{skipped}; the fastest on the first "
                "launch's arguments is kept (this report is the first config's)"
            )
        return first

    def build_one(self, variant: Variant, config: Any) -> Artifact:
        """The image for one variant under one autotune config (None: no autotuning)."""
        start = time.perf_counter()
        kwargs = self._kwargs(variant, config)
        args = [stand_in(a) for a in variant.args]
        self._heuristics(args, kwargs)
        signature, constexprs, attrs, options, bound = self._specialise(args, kwargs)
        compiled = self._compile(signature, constexprs, attrs, options)
        artifact = self._artifact(compiled, variant, signature, constexprs, attrs, bound)
        artifact.abi["config"] = _config_text(config)
        if artifact.stage is not None:
            artifact.stage.duration_ms = (time.perf_counter() - start) * 1e3
        return artifact

    # ------------------------------------------------------------ steps

    def _kwargs(self, variant: Variant, config: Any) -> dict[str, Any]:
        from triton import knobs

        kwargs: dict[str, Any] = dict(variant.constants)
        if variant.num_warps is not None:
            kwargs["num_warps"] = int(variant.num_warps)
        if variant.num_stages is not None:
            kwargs["num_stages"] = int(variant.num_stages)
        if config is not None:  # the config's meta-parameters win over the launch's
            kwargs.update(config.all_kwargs() if hasattr(config, "all_kwargs") else config.kwargs)
        kwargs["debug"] = kwargs.get("debug", self.jit.debug) or knobs.runtime.debug
        mode = getattr(knobs.compilation, "instrumentation_mode", None)
        if mode is not None:
            kwargs["instrumentation_mode"] = mode
        return kwargs

    def _heuristics(self, args: list[Any], kwargs: dict[str, Any]) -> None:
        names = [p.name for p in self.jit.params]
        for values in self.heuristics:
            for name, rule in values.items():
                try:
                    kwargs[name] = rule({**dict(zip(names, args, strict=False)), **kwargs})
                except Exception as exc:  # the learner's rule, on what the box knows
                    raise pysource.deferred_error(exc, self.path, _compiler()) from None

    def _specialise(self, args: list[Any], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        from triton.compiler.compiler import make_backend
        from triton.runtime.jit import create_function_from_signature

        backend = make_backend(self.target)
        binder = create_function_from_signature(self.jit.signature, self.jit.params, backend)
        try:
            bound, specialization, options = binder(*args, **kwargs)
            options, signature, constexprs, attrs = self.jit._pack_args(
                backend, kwargs, bound, specialization, options
            )
        except (TypeError, KeyError) as exc:
            raise KernelError(f"{self.name}: {exc}") from None
        return signature, constexprs, attrs, options, bound

    def _compile(self, signature: Any, constexprs: Any, attrs: Any, options: Any) -> Any:
        import triton
        from triton.compiler import ASTSource

        source = ASTSource(self.jit, signature, constexprs, attrs)
        try:
            return triton.compile(source, target=self.target, options=options.__dict__)
        except Exception as exc:
            raise compile_failure(exc, self.path, self.source) from None

    def _artifact(
        self, compiled: Any, variant: Variant, signature: dict[str, str], constexprs: dict,
        attrs: dict, bound: dict[str, Any],
    ) -> Artifact:  # fmt: skip
        md = compiled.metadata
        ptx = compiled.asm.get("ptx") or ""
        entry, sizes = ptx_entry(ptx)
        args, params = [], []
        for i, param in enumerate(self.jit.params):
            ty = signature[param.name]
            aligned = any(a[0] == "tt.divisibility" for a in attrs.get((i,), []))
            if i < len(variant.args):
                spec = variant.args[i]
                described = {"name": param.name, "kind": spec.kind, "dtype": spec.dtype,
                             "type": ty, "aligned": aligned}  # fmt: skip
                if ty == "constexpr":
                    described["constant"] = _plain(constexprs[(i,)])
                else:
                    params.append({"arg": i, "type": ty, "ctype": _ctype(ty)})
                args.append(described)
            elif ty != "constexpr":  # a parameter left to its default
                value = bound[param.name]
                params.append({"default": 0 if value is None else value, "type": ty,
                               "ctype": _ctype(ty)})  # fmt: skip
        extra = len(sizes) - len(params)
        if not 0 <= extra <= len(_SCRATCH):
            raise RuntimeError(f"{entry}: {len(sizes)} PTX parameters for {len(params)} arguments")
        params += [{"scratch": s, "ctype": "uint64"} for s in _SCRATCH[:extra]]
        check_layout([p["ctype"] for p in params], sizes, f"{self.name} ({entry})")
        num_ctas = int(getattr(md, "num_ctas", 1) or 1)
        abi = {
            "convention": CONVENTION,
            "parameters": self.parameters(),
            "args": args,
            "params": params,
            # Every value compiled in: declared constexprs and specialised arguments.
            "constexprs": {
                self.jit.params[path[0]].name: _plain(value)
                for path, value in constexprs.items()
                if len(path) == 1
            },
            "num_warps": int(md.num_warps),
            "num_ctas": num_ctas,
            "num_stages": int(md.num_stages),
            "shared": int(md.shared),
            "cluster_dims": list(getattr(md, "cluster_dims", None) or (num_ctas, 1, 1)),
            "global_scratch": _scratch(md, "global"),
            "profile_scratch": _scratch(md, "profile"),
            "launch_cooperative_grid": bool(getattr(md, "launch_cooperative_grid", False)),
            "launch_pdl": bool(getattr(md, "launch_pdl", False)),
            "triton": str(getattr(md, "triton_version", "") or _version()),
        }
        arch = ptx_target(ptx) or f"sm_{self.target.arch}"
        cubin = compiled.asm["cubin"]
        stage = self._stage(compiled, cubin, ptx, arch)
        return Artifact.of(BACKEND, "cubin", cubin, md.name, arch=arch, abi=abi, stage=stage)

    def _stage(self, compiled: Any, cubin: bytes, ptx: str, arch: str) -> CompileStage:
        md = compiled.metadata
        registers, local = _resource_usage(cubin)
        resources = Resources(
            kernel=md.name, registers=registers, shared_bytes=int(md.shared),
            stack_frame_bytes=local, arch=arch,
        )  # fmt: skip
        notes = [f"{self.name}: {registers} registers per thread", f"num_warps={md.num_warps}",
                 f"num_stages={md.num_stages}"]  # fmt: skip
        sass = None
        try:  # Triton disassembles with the tools it ships
            if not self.listed:
                sass = truncate(compiled.asm["sass"], TEXT_LIMIT_BYTES, "SASS")
        except Exception as exc:  # noqa: BLE001 - a listing is an extra, never a failure
            notes.append(f"SASS unavailable: {type(exc).__name__}: {exc}")
        ir = {} if self.listed else ir_listings(compiled.asm)
        self.listed = True
        return CompileStage(
            ok=True, log="; ".join(notes), resources=[resources],
            ptx=truncate(ptx, TEXT_LIMIT_BYTES, "PTX"), sass=sass, compiler=_compiler(), ir=ir,
        )  # fmt: skip


def _ctype(ty: str) -> str:
    if ty.startswith("*"):
        return "uint64"
    if ty not in _CTYPES:
        raise KernelError(f"a kernel parameter of Triton type {ty} cannot be passed here")
    return _CTYPES[ty]


def _plain(value: Any) -> Any:
    value = getattr(value, "value", value)  # tl.constexpr
    return value if isinstance(value, bool | int | float | str) or value is None else str(value)


def _scratch(md: Any, kind: str) -> dict[str, int]:
    return {
        "size": int(getattr(md, f"{kind}_scratch_size", 0) or 0),
        "align": int(getattr(md, f"{kind}_scratch_align", 1) or 1),
    }


def _config_text(config: Any) -> str | None:
    return None if config is None else str(config)


def _lean(artifact: Artifact) -> Artifact:
    """An autotune alternative without its listings: the resources are enough."""
    if artifact.stage is None:
        return artifact
    return artifact.model_copy(
        update={"stage": artifact.stage.model_copy(update={"ptx": None, "sass": None, "ir": {}})}
    )


def _version() -> str:
    return pysource.version("triton") or "?"


def _resource_usage(cubin: bytes) -> tuple[int | None, int | None]:
    """(registers, local bytes per thread) from `cuobjdump -res-usage`, where it runs."""
    try:
        from triton import knobs

        tool = knobs.nvidia.cuobjdump.path
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(cubin)
            f.flush()
            out = subprocess.run(
                [tool, "-res-usage", f.name], capture_output=True, text=True, timeout=30
            ).stdout
    except Exception:  # noqa: BLE001 - no cuobjdump: no register count
        return None, None
    regs = re.search(r"REG:(\d+)", out)
    local = re.search(r"LOCAL:(\d+)", out)
    return (int(regs[1]) if regs else None), (int(local[1]) if local else None)
