"""Kernel images built as a learner's box builds them: without a GPU, for sm_90.

Numba CUDA compiles with NVVM and ptxas, Triton with its own compiler and ptxas; neither
needs a device. Each backend's builds run in one child process that sees no GPU
(tests.kernels.artifact_builds), so these tests run on any machine with the compilers.
Loading and launching the images needs a GPU: tests/kernels/test_artifacts_gpu.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kplay.kernels.artifact import ArgSpec, Artifact, Variant
from kplay.kernels.backends.toolkit_parse import ptx_entry_params
from tests.kernels.artifact_builds import build_in_box

PROBLEMS = Path(__file__).resolve().parents[2] / "kernels" / "problems"
F32_1D = ArgSpec(kind="array", dtype="float32", ndim=1)
F32_2D = ArgSpec(kind="array", dtype="float32", ndim=2)


def _solution(slug: str, path: str) -> str:
    return (PROBLEMS / slug / "solutions" / path).read_text()


def _int(value: int | None = None) -> ArgSpec:
    return ArgSpec(kind="scalar", dtype="int32", value=value)


def _job(backend: str, source: str, kernel: str, *variants: Variant) -> dict[str, Any]:
    return {
        "backend": backend,
        "source": source,
        "kernel": kernel,
        "target_cc": "9.0",
        "variants": [v.model_dump(mode="json") for v in variants],
    }


def _artifact(build: dict[str, Any]) -> Artifact:
    assert "artifact" in build, build
    return Artifact.model_validate(build["artifact"])


def _entry_param_count(artifact: Artifact) -> int:
    ptx = artifact.image().decode() if artifact.format == "ptx" else artifact.stage.ptx
    assert ptx, "the stage carries the PTX"
    return ptx_entry_params(ptx)[artifact.entry]


def _check_image(artifact: Artifact) -> None:
    if artifact.format == "cubin":
        assert artifact.image()[:4] == b"\x7fELF"
    else:  # no ptxas here took the PTX: the driver compiles it at load
        assert f".entry {artifact.entry}" in artifact.image().decode()
    assert artifact.arch.startswith("sm_90")
    assert _entry_param_count(artifact) == len(artifact.abi["params"])


# ---------------------------------------------------------------- Numba CUDA

MIXED = """from numba import cuda


@cuda.jit(fastmath=True)
def mixed(out, a, b, c, flag):
    i = cuda.grid(1)
    if i < out.shape[0]:
        v = a + b + c.real - c.imag
        out[i] = v if flag else -v
"""
MIXED_ARGS = (
    ArgSpec(kind="array", dtype="float64", ndim=1),
    ArgSpec(kind="scalar", dtype="float32"),
    ArgSpec(kind="scalar", dtype="int64"),
    ArgSpec(kind="scalar", dtype="complex64"),
    ArgSpec(kind="scalar", dtype="bool"),
)
NUMBA_TYPO = """from numba import cuda


@cuda.jit
def vector_add(a, b, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = a[i] + undefined_name[i]
"""


@pytest.fixture(scope="module")
def numba_builds(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    vector = Variant(args=(F32_1D, F32_1D, F32_1D, _int()))
    jobs = [
        _job("numba-cuda", _solution("vector_add", "correct/vector_add.numba_cuda.py"),
             "vector_add", vector, Variant(args=(F32_1D, F32_1D, _int()))),
        _job("numba-cuda", _solution("transpose", "correct/transpose_tiled_padded.numba_cuda.py"),
             "transpose", Variant(args=(F32_2D, F32_2D, _int(), _int()))),
        _job("numba-cuda", MIXED, "mixed", Variant(args=MIXED_ARGS)),
        _job("numba-cuda", NUMBA_TYPO, "vector_add", vector),
    ]  # fmt: skip
    return build_in_box(jobs, tmp_path_factory.mktemp("numba-builds"))


def _array_params(arg: int, ndim: int) -> list[dict[str, Any]]:
    head = [("meminfo", "uint64"), ("parent", "uint64"), ("nitems", "int64"),
            ("itemsize", "int64"), ("data", "uint64")]  # fmt: skip
    out = [{"arg": arg, "field": f, "ctype": c} for f, c in head]
    for field in ("shape", "strides"):
        out += [{"arg": arg, "field": field, "dim": d, "ctype": "int64"} for d in range(ndim)]
    return out


def test_numba_vector_add_image_lists_numbas_flattened_parameters(numba_builds: list) -> None:
    answer = numba_builds[0]
    assert answer["stage"]["ok"] and answer["params"] == ["a", "b", "out", "n"]
    artifact = _artifact(answer["builds"][0])
    assert artifact.backend == "numba-cuda"
    assert "vector_add" in artifact.entry and artifact.entry.startswith("_Z")
    _check_image(artifact)
    expected = [p for i in range(3) for p in _array_params(i, 1)]
    expected.append({"arg": 3, "field": "value", "ctype": "int32"})
    assert artifact.abi["params"] == expected  # 3 arrays of 7 parameters, then n
    assert artifact.abi["parameters"] == ["a", "b", "out", "n"]
    assert [a["numba"] for a in artifact.abi["args"]][-1] == "int32"
    if artifact.format == "cubin":  # ptxas's report
        (res,) = artifact.stage.resources
        assert res.kernel == "vector_add" and res.registers and res.shared_bytes == 0


def test_numba_rejects_a_variant_with_the_wrong_argument_count(numba_builds: list) -> None:
    build = numba_builds[0]["builds"][1]
    assert build["error"] == "kernel" and "takes 4 parameters" in build["message"]


def test_numba_two_dimensional_arrays_pass_shape_and_strides_per_dimension(
    numba_builds: list,
) -> None:
    artifact = _artifact(numba_builds[1]["builds"][0])
    _check_image(artifact)
    assert len(artifact.abi["params"]) == 2 * 9 + 2
    assert artifact.abi["params"][:9] == _array_params(0, 2)
    (res,) = artifact.stage.resources
    if artifact.format == "cubin":
        assert res.shared_bytes and res.shared_bytes > 4096  # the padded tile


def test_numba_scalars_keep_their_own_types(numba_builds: list) -> None:
    artifact = _artifact(numba_builds[2]["builds"][0])
    _check_image(artifact)
    scalars = [(p["arg"], p["field"], p["ctype"]) for p in artifact.abi["params"][7:]]
    assert scalars == [
        (1, "value", "float32"),
        (2, "value", "int64"),
        (3, "real", "float32"),
        (3, "imag", "float32"),
        (4, "value", "bool"),
    ]


def test_numba_compile_error_points_at_the_learners_line(numba_builds: list) -> None:
    (build,) = numba_builds[3]["builds"]
    assert build["error"] == "compile"
    (diag,) = build["stage"]["diagnostics"]
    assert diag["line"] == 8 and "undefined_name" in diag["message"]


# ---------------------------------------------------------------- Triton

TOTAL = """import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 256}, num_warps=2),
        triton.Config({"BLOCK": 1024}, num_warps=8, num_stages=2),
    ],
    key=["n"],
    reset_to_zero=["out_ptr"],
)
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def total(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(tl.program_id(0) * BLOCK, n, tl.num_programs(0) * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        if EVEN:
            acc += tl.load(x_ptr + offs)
        else:
            acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.atomic_add(out_ptr, tl.sum(acc, axis=0))
"""
TRITON_TYPO = """import triton
import triton.language as tl


@triton.jit
def vector_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x + undefined_thing, mask=offs < n)
"""


def _triton_vector(n: int | None, **constants: int) -> Variant:
    return Variant(
        args=(F32_1D, F32_1D, F32_1D, _int(n)),
        constants=tuple(sorted(constants.items())),
        num_warps=4,
    )


@pytest.fixture(scope="module")
def triton_builds(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    alpha = ArgSpec(kind="scalar", dtype="float32", value=2.5)
    jobs = [
        _job("triton", _solution("vector_add", "correct/vector_add.triton.py"), "vector_add",
             _triton_vector(1000, BLOCK=1024), _triton_vector(1, BLOCK=1024),
             _triton_vector(4096, BLOCK=1024), _triton_vector(1000)),
        _job("triton", _solution("saxpy", "correct/saxpy.triton.py"), "saxpy",
             Variant(args=(alpha, F32_1D, F32_1D, F32_1D, _int(77)), constants=(("BLOCK", 512),))),
        _job("triton", TOTAL, "total", Variant(args=(F32_1D, F32_1D, _int(4096)))),
        _job("triton", TRITON_TYPO, "vector_add", _triton_vector(1000, BLOCK=1024)),
    ]  # fmt: skip
    return build_in_box(jobs, tmp_path_factory.mktemp("triton-builds"))


def _types(artifact: Artifact) -> list[str]:
    return [p.get("type") or p["scratch"] for p in artifact.abi["params"]]


def test_triton_vector_add_image_and_launch_metadata(triton_builds: list) -> None:
    answer = triton_builds[0]
    assert answer["stage"]["ok"] and answer["params"] == ["a_ptr", "b_ptr", "out_ptr", "n"]
    artifact = _artifact(answer["builds"][0])
    assert artifact.backend == "triton" and artifact.format == "cubin"
    assert artifact.entry == "vector_add" and artifact.arch == "sm_90a"
    _check_image(artifact)
    abi = artifact.abi
    pointers = ["*fp32"] * 3
    assert _types(artifact)[:4] == [*pointers, "i32"]
    # Recent Tritons append the global and the profile scratch pointers, in that order.
    assert set(_types(artifact)[4:]) <= {"global_scratch", "profile_scratch"}
    assert [a["aligned"] for a in abi["args"]] == [True, True, True, False]
    assert abi["constexprs"] == {"BLOCK": 1024}
    assert (abi["num_warps"], abi["num_ctas"], abi["num_stages"]) == (4, 1, 3)
    assert abi["global_scratch"]["size"] == 0 and abi["profile_scratch"]["size"] == 0
    assert abi["shared"] >= 0 and not abi["launch_cooperative_grid"] and not abi["launch_pdl"]
    (res,) = artifact.stage.resources
    assert res.shared_bytes == abi["shared"] and res.arch == "sm_90a"


def test_triton_specialises_integers_as_its_launcher_does(triton_builds: list) -> None:
    one, sixteen = (_artifact(b) for b in triton_builds[0]["builds"][1:3])
    # n == 1 is compiled in: the kernel has one parameter fewer.
    assert _types(one)[:3] == ["*fp32"] * 3 and "i32" not in _types(one)
    assert one.abi["args"][3]["constant"] == 1 and one.abi["constexprs"]["n"] == 1
    assert _entry_param_count(one) == len(one.abi["params"])
    # n % 16 == 0 is kept as a parameter, marked divisible.
    assert "i32" in _types(sixteen) and sixteen.abi["args"][3]["aligned"] is True


def test_triton_reports_a_missing_constexpr(triton_builds: list) -> None:
    build = triton_builds[0]["builds"][3]
    assert build["error"] == "kernel" and "BLOCK" in build["message"]


def test_triton_float_scalars_are_fp32(triton_builds: list) -> None:
    artifact = _artifact(triton_builds[1]["builds"][0])
    _check_image(artifact)
    first = artifact.abi["params"][0]
    assert (first["arg"], first["type"], first["ctype"]) == (0, "fp32", "float32")
    assert artifact.abi["constexprs"] == {"BLOCK": 512}


def test_triton_autotune_builds_one_image_per_config(triton_builds: list) -> None:
    artifact = _artifact(triton_builds[2]["builds"][0])
    tune = artifact.abi["autotune"]
    configs = [Artifact.model_validate(c) for c in tune["configs"]]
    assert [c.abi["num_warps"] for c in configs] == [2, 8]
    assert [c.abi["num_stages"] for c in configs] == [3, 2]
    assert [c.abi["constexprs"] for c in configs] == [
        {"BLOCK": 256, "EVEN": True},  # the heuristics saw the config's BLOCK
        {"BLOCK": 1024, "EVEN": True},
    ]
    assert tune["reset_to_zero"] == [1] and tune["restore_value"] == []
    for config in configs:  # the alternatives carry no listings, only their resources
        assert config.image()[:4] == b"\x7fELF" and config.entry == "total"
        assert [p.get("type") for p in config.abi["params"][:3]] == ["*fp32", "*fp32", "i32"]
    assert artifact.abi["parameters"] == ["x_ptr", "out_ptr", "n"]


def test_triton_compile_error_points_at_the_learners_line(triton_builds: list) -> None:
    (build,) = triton_builds[3]["builds"]
    assert build["error"] == "compile"
    (diag,) = build["stage"]["diagnostics"]
    assert diag["line"] == 9 and "undefined_thing" in diag["message"]


def test_bfloat16_bits_round_to_nearest_even() -> None:
    from kplay.kernels.backends.image_launch import bfloat16_bits

    assert bfloat16_bits(1.0) == 0x3F80 and bfloat16_bits(-2.0) == 0xC000
    # 1 + 2**-8 lies halfway between two bfloat16 values: it rounds to the even one, 1.0.
    assert bfloat16_bits(np.float32(1 + 2**-8)) == 0x3F80
    assert bfloat16_bits(np.float32(1 + 3 * 2**-8)) == 0x3F82
    assert bfloat16_bits(float("nan")) & 0x7FC0 == 0x7FC0
