"""The CuTe DSL backend: parameter layout and packing everywhere; building where the
nvidia-cutlass-dsl package is installed (no GPU needed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from kplay.kernels.artifact import ArgSpec, Artifact, Variant
from kplay.kernels.backends.base import DeferredCompileError, KernelError
from kplay.kernels.backends.cute_dsl import arch_name, host_source
from kplay.kernels.backends.cute_dsl_image import (
    CONVENTION,
    ParamBlock,
    check_abi,
    pack_params,
    pack_tensor,
    tensor_struct_size,
)
from kplay.kernels.backends.cute_dsl_listing import llvm_fields

SOLUTION = Path(__file__).parent / "data/cute_dsl/vector_add.cute.py"
VEC = Variant(args=(ArgSpec(kind="array", dtype="float32", ndim=1),) * 3
              + (ArgSpec(kind="scalar", dtype="int32"),))  # fmt: skip


class DeviceArray:
    """A host array that presents itself as a device array at a chosen address."""

    def __init__(self, array: np.ndarray, address: int) -> None:
        self.dtype, self.ndim, self.shape, self.strides = (
            array.dtype,
            array.ndim,
            array.shape,
            array.strides,
        )
        self.__cuda_array_interface__ = {"data": (address, False), "shape": array.shape}


def test_llvm_struct_fields_follow_natural_layout() -> None:
    text = ("!llvm.struct<(struct<(ptr<1>, struct<(i32, struct<()>)>)>, "
            "struct<(ptr<1>, struct<(struct<(i32, i32)>, i32)>)>, f32, i32, i64)>")  # fmt: skip
    assert llvm_fields(text) == [
        (["ptr", "i32"], 16), (["ptr", "i32", "i32", "i32"], 24),
        (["f32"], 4), (["i32"], 4), (["i64"], 8),
    ]  # fmt: skip
    with pytest.raises(ValueError):
        llvm_fields("i32")


def test_tensor_struct_sizes() -> None:
    assert [tensor_struct_size(d) for d in (1, 2, 3)] == [16, 24, 32]


def test_pack_tensor_writes_pointer_shape_and_leading_strides() -> None:
    raw = pack_tensor(0x1000, (3, 5), (7, 1), 24)
    assert np.frombuffer(raw[:8], np.uint64)[0] == 0x1000
    assert list(np.frombuffer(raw[8:20], np.int32)) == [3, 5, 7]
    assert raw[20:] == bytes(4)
    with pytest.raises(KernelError, match="aligned"):
        pack_tensor(0x1004, (3,), (1,), 16)
    with pytest.raises(KernelError, match="contiguous"):
        pack_tensor(0x1000, (3, 5), (10, 2), 24)
    with pytest.raises(KernelError, match="32-bit"):
        pack_tensor(0x1000, (2**31,), (1,), 16)


def test_pack_params_checks_each_argument_and_block_points_at_the_bytes() -> None:
    params = [{"arg": 0, "kind": "tensor", "dtype": "float32", "ndim": 2, "size": 24},
              {"arg": 1, "kind": "scalar", "dtype": "int32", "size": 4}]  # fmt: skip
    a = DeviceArray(np.zeros((4, 6), np.float32)[:, :5], 0x2000)
    packed = pack_params(params, [a, np.int32(9)])
    assert list(np.frombuffer(packed[0][8:20], np.int32)) == [4, 5, 6]
    assert packed[1] == np.int32(9).tobytes()
    block = ParamBlock(packed)
    assert block.read(0) == packed[0] and block.read(1) == packed[1] and block.address
    with pytest.raises(KernelError, match="float32"):
        pack_params(params, [DeviceArray(np.zeros((4, 5), np.float64), 0x2000), 1])
    with pytest.raises(KernelError, match="2-D"):
        pack_params(params, [DeviceArray(np.zeros(5, np.float32), 0x2000), 1])
    with pytest.raises(KernelError, match="takes 2"):
        pack_params(params, [a])
    # bfloat16 arrives held as the unsigned integers of its bits (as CuPy holds it); a
    # float16 array of the same width is still refused.
    halves = [{"arg": 0, "kind": "tensor", "dtype": "bfloat16", "ndim": 1, "size": 16}]
    assert pack_params(halves, [DeviceArray(np.zeros(8, np.uint16), 0x3000)])
    with pytest.raises(KernelError, match="expected bfloat16, got float16"):
        pack_params(halves, [DeviceArray(np.zeros(8, np.float16), 0x3000)])


def test_abi_convention_and_sizes_are_checked() -> None:
    good = {"convention": CONVENTION, "params": [{"arg": 0, "kind": "tensor", "dtype": "float32",
                                                  "ndim": 1, "size": 16}]}  # fmt: skip
    assert check_abi(Artifact.of("cute-dsl", "cubin", b"x", "k", abi=good))[0]["size"] == 16
    with pytest.raises(KernelError, match="convention"):
        check_abi(Artifact.of("cute-dsl", "cubin", b"x", "k", abi={"params": []}))
    bad = {**good, "params": [{**good["params"][0], "size": 8}]}
    with pytest.raises(KernelError, match="struct"):
        check_abi(Artifact.of("cute-dsl", "cubin", b"x", "k", abi=bad))


def test_host_source_is_python_with_one_tensor_per_array() -> None:
    text = host_source(Variant(args=(ArgSpec(kind="array", dtype="float16", ndim=2),
                                     ArgSpec(kind="scalar", dtype="float32"))))  # fmt: skip
    compile(text, "host.py", "exec")
    assert "p0: cute.Pointer, s0_0: cutlass.Int32, s0_1: cutlass.Int32, t0_0: cutlass.Int32" in text
    assert "stride=(t0_0, 1,)" in text and "v1: cutlass.Float32" in text
    assert "KERNEL(a0, v1)" in text
    assert arch_name((9, 0)) == "sm_90a" and arch_name((8, 0)) == "sm_80"


# ---------------------------------------------------------------- with the DSL installed

needs_dsl = pytest.mark.skipif(
    importlib.util.find_spec("cutlass") is None or importlib.util.find_spec("cutlass.cute") is None,
    reason="nvidia-cutlass-dsl is not installed",
)


def _exporter(source: str, tmp_path: Path):
    from kplay.kernels.backends import get_backend

    stage, exporter = get_backend("cute-dsl")._exporter(source, "vector_add", tmp_path, (9, 0))
    assert stage.ok, stage.log
    return exporter


@needs_dsl
def test_builds_a_cubin_for_sm90a_without_a_gpu(tmp_path: Path) -> None:
    art = _exporter(SOLUTION.read_text(), tmp_path).build(VEC)
    assert art.format == "cubin" and art.image().startswith(b"\x7fELF") and art.arch == "sm_90a"
    assert "vector_add" in art.entry and art.entry.encode() in art.image()
    assert [p["size"] for p in art.abi["params"]] == [16, 16, 16, 4]
    two_d = Variant(args=(ArgSpec(kind="array", dtype="float32", ndim=2),) * 3 + VEC.args[3:])
    assert [
        p["size"] for p in _exporter(SOLUTION.read_text(), tmp_path).build(two_d).abi["params"]
    ][:3] == [24] * 3


@needs_dsl
def test_a_learner_type_error_points_at_its_line(tmp_path: Path) -> None:
    source = SOLUTION.read_text().replace("out[i] = a[i] + b[i]", "out[i] = a[i] + c[i]")
    line = source.splitlines().index("        out[i] = a[i] + c[i]") + 1
    with pytest.raises(DeferredCompileError) as info:
        _exporter(source, tmp_path).build(VEC)
    diag = info.value.stage.diagnostics[0]
    assert not info.value.stage.ok and diag.line == line, diag


@needs_dsl
def test_compile_only_reports_a_build(tmp_path: Path) -> None:
    from kplay.kernels.backends import get_backend
    from kplay.kernels.backends.base import Capability

    backend = get_backend("cute-dsl")
    if backend.capability() is not Capability.compile_only:
        pytest.skip("a GPU is present: the backend runs")
    stage, kernel = backend.compile(SOLUTION.read_text(), "vector_add", tmp_path)
    assert stage.ok and kernel is None and stage.resources[0].arch == "sm_90a"
    stage, _ = backend.compile("def vector_add(a):\n    pass\n", "vector_add", tmp_path)
    assert not stage.ok and "@cute.kernel" in stage.diagnostics[0].message
