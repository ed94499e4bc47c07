"""The block-scaled FP8 GEMM problem (gemm_fp8): its inputs, scales, reference, tolerance,
baseline and launch, and the FP8 tensor-core ceiling it is placed against."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from kplay.kernels import formula, plausibility, roofline
from kplay.kernels.catalog import get_problem
from kplay.kernels.check import compare
from kplay.kernels.draws import Draws
from kplay.kernels.launch import plan, resolve

PROBLEM = get_problem("gemm_fp8")
REF = PROBLEM.reference
FP8 = np.dtype(ml_dtypes.float8_e4m3fn)
BF16 = np.dtype(ml_dtypes.bfloat16)
TOL = PROBLEM.tolerance["bfloat16"]


def _inputs(m: int, n: int, k: int, seed: int = 3) -> dict:
    return REF.generate({"M": m, "N": n, "K": k}, Draws(seed))


def test_operands_and_scales_have_the_declared_shapes_and_types() -> None:
    x = _inputs(17, 256, 384)
    assert (x["A"].dtype, x["A"].shape) == (FP8, (17, 384))
    assert (x["B"].dtype, x["B"].shape) == (FP8, (256, 384))  # N x K: K-major
    assert (x["a_scale"].dtype, x["a_scale"].shape) == (np.float32, (17, 3))
    assert (x["b_scale"].dtype, x["b_scale"].shape) == (np.float32, (2, 3))
    # The shapes problem.toml declares are the ones drawn.
    env = {"M": 17, "N": 256, "K": 384}
    for arg in PROBLEM.args:
        if arg.is_array and arg.role == "in":
            declared = tuple(formula.evaluate_int(s, env) for s in arg.shape)
            assert x[arg.name].shape == declared, arg.name


def test_every_block_is_scaled_to_the_fp8_range() -> None:
    x = _inputs(5, 256, 512)
    a = np.abs(x["A"].astype(np.float32)).reshape(5, 4, 128)
    b = np.abs(x["B"].astype(np.float32)).reshape(2, 128, 4, 128)
    # Each block's largest magnitude lands on 448, e4m3's largest finite value.
    assert np.all(a.max(axis=2) == 448.0)
    assert np.all(b.max(axis=(1, 3)) == 448.0)
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(b))
    # The scales differ from block to block: a kernel using the wrong one is caught.
    assert len(np.unique(x["a_scale"])) == x["a_scale"].size
    assert np.ptp(x["a_scale"]) / x["a_scale"].mean() > 0.1


def test_quantising_keeps_values_within_fp8_rounding() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 256)).astype(np.float32) * np.float32(5.0)
    q, scale = REF.quantise(x, 1)
    back = REF.dequantise(q, scale, 1)
    # e4m3 keeps 3 mantissa bits: within 2^-4 of each value (normal range), or half the
    # smallest subnormal step (2^-10 of the scale) near zero.
    bound = np.maximum(np.abs(x) * 2.0**-4, np.repeat(scale, 128, axis=1) * 2.0**-10)
    assert np.all(np.abs(back - x) <= bound)


def test_generation_is_seeded() -> None:
    one, again, other = _inputs(9, 128, 256, 1), _inputs(9, 128, 256, 1), _inputs(9, 128, 256, 2)
    for name in one:
        assert np.array_equal(one[name].view(np.uint8), again[name].view(np.uint8)), name
    assert not np.array_equal(one["A"].view(np.uint8), other["A"].view(np.uint8))


def test_reference_matches_a_product_worked_by_hand() -> None:
    # M = 1, N = 128, K = 256: two blocks of K, one block of N.
    a = np.zeros((1, 256), dtype=np.float32)
    a[0, :128], a[0, 128:] = 1.0, 2.0
    b = np.zeros((128, 256), dtype=np.float32)
    b[:, :128] = 0.5
    b[:, 128:] = (np.arange(128) % 4)[:, None]  # row j of B (column j of C): j mod 4
    inputs = {
        "A": a.astype(FP8),
        "B": b.astype(FP8),
        "a_scale": np.array([[3.0, 0.25]], dtype=np.float32),
        "b_scale": np.array([[2.0, 4.0]], dtype=np.float32),
    }
    c = REF.reference(inputs, {"M": 1, "N": 128, "K": 256})["C"]
    # Block 0: 128 * (1 * 3) * (0.5 * 2) = 384. Block 1: 128 * (2 * 0.25) * ((j mod 4) * 4).
    expected = 384.0 + 256.0 * (np.arange(128) % 4)
    assert c.dtype == np.float64
    assert np.array_equal(c[0], expected)


def test_tolerance_takes_bf16_rounding_and_rejects_a_wrong_scale() -> None:
    assert TOL.rtol == float(ml_dtypes.finfo(BF16).eps)  # one unit of bfloat16
    m, n, k = 64, 256, 1024
    x = _inputs(m, n, k)
    exact = REF.reference(x, {"M": m, "N": n, "K": k})["C"]
    # Rounded once to bf16, and one unit off: what a correct fp32 kernel may return.
    rounded = exact.astype(np.float32).astype(BF16)
    assert compare("C", rounded, exact, TOL)["ok"]
    up = np.nextafter(rounded.astype(np.float32), np.float32(np.inf)).astype(BF16)
    assert compare("C", np.where(exact > 1, up, rounded).astype(BF16), exact, TOL)["ok"]
    # Every block scaled with the first block's scales (the scaled_once wrong kernel).
    a = x["A"].astype(np.float64) * x["a_scale"][:, :1].astype(np.float64)
    b = x["B"].astype(np.float64) * np.repeat(x["b_scale"][:, :1], 128, axis=0)
    wrong = (a @ b.T).astype(np.float32).astype(BF16)
    result = compare("C", wrong, exact, TOL)
    assert not result["ok"] and result["mismatches"] > m * n // 2


def _short_sums(x: dict, bits: int) -> np.ndarray:
    """C as a tensor core with short adders would make it: each 32 products of a block
    summed exactly, the block's running sum truncated to `bits` bits after each; the
    blocks scaled and added in fp32; rounded once to bf16."""
    a, b = x["A"].astype(np.float64), x["B"].astype(np.float64)
    m, k = a.shape
    acc = np.zeros((m, b.shape[0]), dtype=np.float32)
    for kb in range(k // 128):
        part = np.zeros_like(acc, dtype=np.float64)
        for g in range(kb * 128, kb * 128 + 128, 32):
            mant, exp = np.frexp(part + a[:, g : g + 32] @ b[:, g : g + 32].T)
            part = np.ldexp(np.trunc(mant * 2.0**bits) / 2.0**bits, exp)
        scale = x["a_scale"][:, kb, None] * np.repeat(x["b_scale"][:, kb], 128)[None, :]
        acc += part.astype(np.float32) * scale.astype(np.float32)
    return acc.astype(BF16)


def test_tolerance_leaves_room_for_the_tensor_cores_short_sums() -> None:
    """The tolerance's comment: 13 bits kept in a block's sum still pass the longest-K
    case the interpreter skips; a sum kept to 7 bits (bf16's) would not."""
    case = next(c for c in PROBLEM.tests if c.name == "300x640x4096")
    x = REF.generate(dict(case.params), Draws(case.seed))
    exact = REF.reference(x, dict(case.params))["C"]
    assert compare("C", _short_sums(x, 13), exact, TOL)["ok"]
    assert not compare("C", _short_sums(x, 7), exact, TOL)["ok"]


def test_baseline_is_scaled_mm_on_the_same_fp8_bytes() -> None:
    """On the host (NumPy arrays, torch's CPU _scaled_mm): per-tensor scales of one, so
    C = A_q @ B_q^T, rounded to bf16."""
    pytest.importorskip("torch")
    x = _inputs(32, 128, 256)
    c = np.full((32, 128), np.nan, dtype=np.float32).astype(BF16)
    arrays = {**x, "C": c}
    REF.baseline(arrays, {"M": 32, "N": 128, "K": 256}, np)
    plain = x["A"].astype(np.float64) @ x["B"].astype(np.float64).T
    got = c.astype(np.float64)
    assert np.all(np.isfinite(got))
    assert np.all(np.abs(got - plain) <= 2.0**-7 * np.abs(plain) + 1e-6)


def test_solution_launch_holds_on_every_case() -> None:
    path = PROBLEM.solution_path("correct", "gemm_fp8_blockscaled.triton.py")
    launch = plan(PROBLEM.launch["triton"], path.read_text(), None)
    assert launch.num_warps == 8
    for case in [*PROBLEM.tests, *PROBLEM.benchmarks]:
        p = dict(case.params)
        assert p["N"] % 128 == 0 and p["K"] % 128 == 0, case.name
        spec = resolve(launch, p)
        assert spec.constants["BLOCK_K"] == 128 == spec.constants["BLOCK_N"]
        tiles = -(-p["M"] // 128) * (p["N"] // 128)
        assert tuple(spec.grid) == (tiles,), case.name


def test_fp8_ceiling_places_a_fast_fp8_gemm_below_its_roof() -> None:
    """A 4096^3 FP8 GEMM at 1300 TFLOP/s is beyond the H100's BF16 roof (989) but not its
    FP8 one (1979): against fp8_tc it is placed, not called impossible."""
    assert PROBLEM.compute_ceiling == "fp8_tc"
    ceilings = roofline.datasheet("NVIDIA H100 80GB HBM3")
    assert ceilings is not None and ceilings.fp8_tc_flops_per_s == 1979e12
    assert roofline.datasheet("NVIDIA H200").fp8_tc_flops_per_s == 1979e12  # type: ignore[union-attr]
    assert roofline.datasheet("NVIDIA A100-SXM4-80GB").fp8_tc_flops_per_s is None  # type: ignore[union-attr]
    p = {"M": 4096, "N": 4096, "K": 4096}
    flops = float(formula.evaluate(PROBLEM.flops, p))
    nbytes = float(formula.evaluate(PROBLEM.bytes, p))
    us = flops / 1300e12 * 1e6
    assert plausibility.too_fast(flops, nbytes, us, ceilings, "fp8_tc") is None
    assert plausibility.too_fast(flops, nbytes, us, ceilings, "bf16_tc") is not None
    placed = roofline.place(flops, nbytes, us, ceilings, "fp8_tc")
    assert placed is not None and placed.bound == "compute"
    assert placed.percent_of_roofline == pytest.approx(100 * 1300 / 1979)
