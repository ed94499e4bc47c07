"""CuTe DSL: a learner's `@cute.kernel` in Python (nvidia-cutlass-dsl), built in the box.

The learner writes the kernel only; the grid and block are the problem's, as for CUDA
C++. For each launch variant the box writes a small `@cute.jit` host function that makes
every array a tensor (a pointer, its dynamic shape, a row-major stride) and launches the
learner's kernel on them, and has the DSL compile it for the evaluator's GPU (sm_90a on
an H200). The DSL lowers the device code to a cubin inside its MLIR module and then
wraps the host code in a JIT engine that needs the CUDA driver; the box stops it there,
so building needs no GPU at all. From the module it takes the cubin, the kernel's
symbol, and the struct the host code packs for cuLaunchKernel, which must match the
layout kernels.backends.cute_dsl_image packs in the evaluator, field for field.

Without a GPU the backend is compile-only: compile() builds one variant (the one
`variant_hint` names, else float32 1-D arrays and the scalars the kernel's annotations
name) and reports its resources and SASS where cuobjdump is installed.
"""

from __future__ import annotations

import io
import os
import re
import time
from pathlib import Path
from typing import Any

from kplay.kernels.artifact import ArgSpec, Artifact, Variant
from kplay.kernels.backends import pysource
from kplay.kernels.backends.base import (
    ArrayKind,
    Backend,
    Capability,
    CompiledKernel,
    DeferredCompileError,
    Exporter,
    register,
)
from kplay.kernels.backends.cute_dsl_image import (
    ASSUMED_ALIGN,
    CONVENTION,
    CuteImageKernel,
    tensor_struct_size,
)
from kplay.kernels.backends.cute_dsl_listing import cubin_stage, llvm_fields
from kplay.kernels.hardware import has_cuda_gpu
from kplay.kernels.models import CompileStage

DIST = "nvidia-cutlass-dsl"
PINNED = "4.2.0"
_EXPECTED = "decorate it with @cute.kernel (import cutlass.cute as cute) to make it a CuTe kernel"
# NumPy dtype name -> the DSL's numeric type, for tensors and scalars alike.
_NUMERIC = {
    "float64": "Float64", "float32": "Float32", "float16": "Float16", "bfloat16": "BFloat16",
    "int64": "Int64", "int32": "Int32", "int16": "Int16", "int8": "Int8",
    "uint64": "Uint64", "uint32": "Uint32", "uint16": "Uint16", "uint8": "Uint8",
}  # fmt: skip
_SCALAR_TYPE = {v: k for k, v in _NUMERIC.items()}


class _Captured(Exception):
    """Raised from the DSL's JIT step: the compiled module is all the box wants."""


def _compiler() -> str:
    return f"{DIST} {pysource.version(DIST) or '?'}"


def arch_name(cc: tuple[int, int]) -> str:
    """sm_90a for Hopper (the DSL's wgmma/TMA need the `a` target), sm_80 before it."""
    return f"sm_{cc[0]}{cc[1]}" + ("a" if cc[0] >= 9 else "")


def _dsl(arch: str) -> Any:
    """The DSL's singleton, set to build for `arch` and to keep no files."""
    os.environ["CUTE_DSL_ARCH"] = arch
    os.environ.setdefault("CUTE_DSL_DISABLE_FILE_CACHING", "1")
    from cutlass.cutlass_dsl import CuTeDSL

    dsl = CuTeDSL._get_dsl()
    dsl.envar.arch = arch
    return dsl


def host_source(variant: Variant) -> str:
    """The @cute.jit launcher for one variant: arrays in as pointers and layout values."""
    params, lets, call = [], [], []
    for i, arg in enumerate(variant.args):
        if arg.kind == "scalar":
            params.append(f"v{i}: cutlass.{_NUMERIC[arg.dtype]}")
            call.append(f"v{i}")
            continue
        shape = [f"s{i}_{d}" for d in range(arg.ndim)]
        stride = [f"t{i}_{d}" for d in range(arg.ndim - 1)] + ["1"]
        params += [f"p{i}: cute.Pointer"] + [f"{s}: cutlass.Int32" for s in shape + stride[:-1]]
        layout = f"cute.make_layout(({', '.join(shape)},), stride=({', '.join(stride)},))"
        lets.append(f"    a{i} = cute.make_tensor(p{i}, {layout})")
        call.append(f"a{i}")
    return "\n".join([
        "import cutlass", "import cutlass.cute as cute", "", "KERNEL = None", "", "",
        "@cute.jit", f"def kplay_host({', '.join(params)}):", *lets,
        f"    KERNEL({', '.join(call)}).launch(grid=[1, 1, 1], block=[1, 1, 1])", "",
    ])  # fmt: skip


def host_args(variant: Variant) -> list[Any]:
    """Stand-ins for cute.compile: typed pointers (never dereferenced) and small numbers."""
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_ptr

    out: list[Any] = []
    for arg in variant.args:
        if arg.kind == "scalar":
            out.append(
                getattr(cutlass, _NUMERIC[arg.dtype])(arg.value if arg.value is not None else 1)
            )
            continue
        elem = getattr(cutlass, _NUMERIC[arg.dtype])
        out.append(
            make_ptr(elem, ASSUMED_ALIGN, cute.AddressSpace.gmem, assumed_align=ASSUMED_ALIGN)
        )
        out += [cutlass.Int32(1)] * (2 * arg.ndim - 1)
    return out


def _unescape(blob: bytes) -> bytes:
    """The cubin from the text of a gpu.binary's `bin = "..."`: \\XX hex and \\\\ escapes."""
    out, i = bytearray(), 0
    while i < len(blob):
        if blob[i] == 0x5C and blob[i + 1 : i + 2] == b"\\":
            out.append(0x5C)
            i += 2
        elif blob[i] == 0x5C:
            out += bytes.fromhex(blob[i + 1 : i + 3].decode())
            i += 3
        else:
            out.append(blob[i])
            i += 1
    return bytes(out)


def module_parts(module: Any) -> tuple[bytes, str]:
    """(cubin, host code text) of a compiled module: its one gpu.binary and the rest."""
    from cutlass._mlir import ir

    blobs: list[bytes] = []

    def visit(op: Any) -> Any:
        if op.name == "gpu.binary":
            buf = io.BytesIO()
            op.write_bytecode(buf)
            blobs.append(buf.getvalue())
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if len(blobs) != 1:
        raise RuntimeError(f"expected one gpu.binary in the compiled module, found {len(blobs)}")
    cubin = _unescape(blobs[0].split(b'bin = "', 1)[1].split(b'">', 1)[0])
    if not cubin.startswith(b"\x7fELF"):
        raise RuntimeError("the gpu.binary does not hold a cubin")
    return cubin, str(module)


def kernel_params(host_ir: str, variant: Variant) -> list[dict[str, Any]]:
    """The launch's parameter layout, checked against the struct the host code packs."""
    packs = re.findall(r"llvm\.alloca %\w+ x (!llvm\.struct<.*>) :", host_ir)
    if len(packs) != 1:
        raise RuntimeError(f"expected one packed launch in the host code, found {len(packs)}")
    fields = llvm_fields(packs[0])
    if len(fields) != len(variant.args):
        raise RuntimeError(
            f"the kernel takes {len(fields)} parameters, the problem {len(variant.args)}"
        )
    params = []
    for i, (arg, (leaves, size)) in enumerate(zip(variant.args, fields, strict=True)):
        if arg.kind == "array":
            want = ["ptr"] + ["i32"] * (2 * arg.ndim - 1)
            if leaves != want or size != tensor_struct_size(arg.ndim):
                raise RuntimeError(
                    f"argument {i}: tensor struct {leaves} ({size} B), expected {want}"
                )
            params.append({"arg": i, "kind": "tensor", "dtype": arg.dtype, "ndim": arg.ndim,
                           "size": size})  # fmt: skip
        else:
            if (
                len(leaves) != 1
                or _SCALAR_TYPE.get(_llvm_numeric(leaves[0], arg.dtype)) != arg.dtype
            ):
                raise RuntimeError(f"argument {i}: scalar {leaves}, expected {arg.dtype}")
            params.append({"arg": i, "kind": "scalar", "dtype": arg.dtype, "size": size})
    return params


def _llvm_numeric(leaf: str, dtype: str) -> str:
    """The DSL type name an LLVM leaf type stands for (signedness from the problem's dtype)."""
    floats = {"f64": "Float64", "f32": "Float32", "f16": "Float16", "bf16": "BFloat16"}
    if leaf in floats:
        return floats[leaf]
    if leaf == "i16" and dtype == "bfloat16":  # a bfloat16 scalar travels as its 16 bits
        return "BFloat16"
    if leaf.startswith("i"):
        return ("Uint" if dtype.startswith("uint") else "Int") + leaf[1:]
    return leaf


class CuteExporter(Exporter):
    def __init__(self, kernel: Any, path: Path, name: str, cc: tuple[int, int]) -> None:
        self.kernel = kernel
        self.path = path
        self.name = name
        self.arch = arch_name(cc)

    def parameters(self) -> list[str] | None:
        return pysource.parameter_names(self.kernel)

    def build(self, variant: Variant) -> Artifact:
        if any(a.dtype not in _NUMERIC for a in variant.args):
            raise DeferredCompileError(pysource.failed_stage(
                "the CuTe DSL backend has no type for " +
                ", ".join(sorted({a.dtype for a in variant.args if a.dtype not in _NUMERIC})),
                compiler=_compiler()))  # fmt: skip
        dsl = _dsl(self.arch)
        import cutlass.cute as cute

        host_path = self.path.with_name(f"{self.path.stem}_host_{variant.key()[:8]}.py")
        host_path.write_text(host_source(variant), encoding="utf-8")
        namespace: dict[str, Any] = {"__name__": f"kplay_cute_host_{variant.key()[:8]}"}
        exec(compile(host_path.read_text(), str(host_path), "exec"), namespace)  # noqa: S102
        namespace["KERNEL"] = self.kernel
        captured: dict[str, Any] = {}
        jit = dsl.compiler_provider.jit

        def capture(module: Any, *args: Any, **kwargs: Any) -> Any:
            captured["module"], captured["symbols"] = module, list(dsl.kernel_symbols)
            raise _Captured

        dsl.compiler_provider.jit = capture
        # The stand-in launch's block (1, 1, 1) would become the kernel's .reqntid, and
        # the driver refuses any other block: the problem's launch decides it instead.
        attrs = dsl._generate_kernel_attrs
        dsl._generate_kernel_attrs = lambda config: {
            k: v for k, v in attrs(config).items() if k != "nvvm.reqntid"
        }
        start = time.perf_counter()
        try:
            cute.compile(namespace["kplay_host"], *host_args(variant))
        except Exception as exc:  # noqa: BLE001 - the learner's errors, or the capture
            if "module" not in captured:
                raise pysource.deferred_error(exc, self.path, _compiler()) from None
        finally:
            dsl.compiler_provider.jit = jit
            del dsl._generate_kernel_attrs
            dsl.post_compilation_cleanup()
        ms = (time.perf_counter() - start) * 1e3
        if "module" not in captured:
            raise RuntimeError("the DSL compiled nothing")
        symbols = captured["symbols"]
        if len(symbols) != 1:
            raise RuntimeError(f"expected one kernel, the DSL compiled {len(symbols)}")
        cubin, host_ir = module_parts(captured["module"])
        params = kernel_params(host_ir, variant)
        stage = cubin_stage(cubin, symbols[0], self.arch, _compiler(), ms)
        abi = {"convention": CONVENTION, "params": params}
        return Artifact.of(BACKEND_KEY, "cubin", cubin, symbols[0], arch=self.arch, abi=abi,
                           stage=stage)  # fmt: skip


BACKEND_KEY = "cute-dsl"


def _check_kind(name: str, obj: Any, compiler: str) -> CompileStage | None:
    """None for a function the DSL decorated (@cute.kernel marks it with its DSL object)."""
    if callable(obj) and getattr(obj, "_dsl_object", None) is not None:
        return None
    return pysource.wrong_kind_stage(name, obj, _EXPECTED, compiler)


def problem_variant(args: Any) -> Variant:
    """The variant a problem's launches make: its arrays' dtypes and ranks, its scalars'."""
    return Variant(args=tuple(
        ArgSpec(kind="array", dtype=a.dtype, ndim=len(a.shape)) if a.is_array
        else ArgSpec(kind="scalar", dtype=a.dtype) for a in args
    ))  # fmt: skip


def default_variant(kernel: Any) -> Variant:
    """A variant from the kernel's annotations: tensors float32 1-D, scalars as annotated."""
    import inspect

    fn = pysource.python_function(kernel) or kernel
    specs = []
    for p in inspect.signature(fn).parameters.values():
        text = str(p.annotation)
        found = next((k for k in _SCALAR_TYPE if re.search(rf"\b{k}\b", text)), None)
        if found and "Tensor" not in text:
            specs.append(ArgSpec(kind="scalar", dtype=_SCALAR_TYPE[found]))
        else:
            specs.append(ArgSpec(kind="array", dtype="float32", ndim=1))
    return Variant(args=tuple(specs))


@register
class CuteDslBackend(Backend):
    key = BACKEND_KEY
    title = "CuTe DSL"
    language = "python"
    # Compile-only: the variant to build (the problem's argument kinds), where known.
    variant_hint: Variant | None = None

    def prepare_for(self, problem: Any) -> None:
        self.variant_hint = problem_variant(problem.args)

    def capability(self) -> Capability:
        if pysource.version(DIST) is None:
            return Capability.unavailable
        return Capability.run if has_cuda_gpu() else Capability.compile_only

    def array_kind(self) -> ArrayKind:
        return ArrayKind.cupy

    def _exporter(self, source: str, kernel_name: str, workdir: Path,
                  cc: tuple[int, int]) -> tuple[CompileStage, CuteExporter | None]:  # fmt: skip
        compiler = _compiler()
        found = pysource.load_kernel(source, kernel_name, workdir, compiler, _check_kind)
        if isinstance(found, CompileStage):
            return found, None
        loaded, obj = found
        exporter = CuteExporter(obj, loaded.path, kernel_name, cc)
        log = f"loaded {kernel_name}; the DSL compiles it for {exporter.arch} per variant"
        stage = CompileStage(ok=True, log=log, compiler=compiler, duration_ms=loaded.load_ms)
        return stage, exporter

    def compile(
        self, source: str, kernel_name: str, workdir: Path
    ) -> tuple[CompileStage, CompiledKernel | None]:
        from kplay.kernels.backends.image_launch import target_cc

        cc = target_cc(self.target_cc or "9.0") if not has_cuda_gpu() else target_cc(self.target_cc)
        stage, exporter = self._exporter(source, kernel_name, workdir, cc)
        if exporter is None:
            return stage, None
        variant = self.variant_hint or default_variant(exporter.kernel)
        try:
            artifact = exporter.build(variant)
        except DeferredCompileError as exc:
            return exc.stage, None
        built = artifact.stage or stage
        if self.capability() is Capability.run:
            return built, CuteImageKernel(artifact)
        return built, None

    def exports(self) -> bool:
        return self.capability() is Capability.run

    def export(
        self, source: str, kernel_name: str, workdir: Path
    ) -> tuple[CompileStage, Exporter | None]:
        from kplay.kernels.backends.image_launch import target_cc

        return self._exporter(source, kernel_name, workdir, target_cc(self.target_cc))

    def load(self, artifact: Artifact) -> CompiledKernel:
        return CuteImageKernel(artifact)

    def versions(self) -> dict[str, str]:
        found = {d: pysource.version(d) for d in (DIST, "cuda-python", "cuda-bindings")}
        return {k: v for k, v in found.items() if v}
