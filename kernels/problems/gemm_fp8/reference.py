"""Inputs, float64 reference and torch._scaled_mm baseline for a block-scaled FP8 GEMM."""

from __future__ import annotations

from typing import Any

import numpy as np

from kplay.kernels import dtypes
from kplay.kernels.draws import Draws, array_module

BLOCK = 128  # the scales' block: 1 x 128 of A (one row, 128 along K), 128 x 128 of B
FP8_MAX = 448.0  # the largest finite float8_e4m3fn


def quantise(x: Any, rows: int) -> tuple[Any, Any]:
    """x (R x K, float32) as float8_e4m3fn in blocks of `rows` x 128, each block scaled so
    that its largest magnitude becomes 448: (x_q, scales of shape (R / rows, K / 128)).

    x_q * scale is x to within fp8's rounding (3 mantissa bits); the scales are float32.
    """
    xp = array_module(x)
    r, k = x.shape
    blocks = x.reshape(r // rows, rows, k // BLOCK, BLOCK)
    amax = xp.abs(blocks).max(axis=(1, 3))
    scale = (xp.maximum(amax, np.float32(1e-30)) / np.float32(FP8_MAX)).astype(xp.float32)
    # Clipped: the largest element over its scale may round to just above 448.
    scaled = xp.clip(blocks / scale[:, None, :, None], -FP8_MAX, FP8_MAX)
    fp8 = dtypes.get("float8_e4m3fn").storage
    return scaled.reshape(r, k).astype(fp8), scale


def dequantise(x_q: Any, scale: Any, rows: int) -> Any:
    """The float64 values x_q * scale, block by block (exact: both fit in float64)."""
    xp = array_module(x_q)
    r, k = x_q.shape
    blocks = x_q.astype(xp.float64).reshape(r // rows, rows, k // BLOCK, BLOCK)
    return (blocks * scale.astype(xp.float64)[:, None, :, None]).reshape(r, k)


def generate(params: dict, draw: Draws) -> dict:
    m, n, k = int(params["M"]), int(params["N"]), int(params["K"])
    # Bell-shaped float32 values, quantised per block with amax scaling: what an FP8
    # training or inference step feeds a GEMM. Every block gets its own scale (the largest
    # of 128 draws varies from block to block), so a kernel that applies the wrong block's
    # scale is off by several percent.
    a_q, a_scale = quantise(draw.normal((m, k)), 1)
    b_q, b_scale = quantise(draw.normal((n, k)), BLOCK)
    return {"A": a_q, "B": b_q, "a_scale": a_scale, "b_scale": b_scale}


def reference(inputs: dict, params: dict) -> dict:
    a = dequantise(inputs["A"], inputs["a_scale"], 1)
    b = dequantise(inputs["B"], inputs["b_scale"], BLOCK)
    return {"C": a @ b.T}


# The baseline's unit scale, one tensor per device.
_ONES: dict[Any, Any] = {}


def baseline(arrays: dict, params: dict, xp: Any) -> None:
    """torch._scaled_mm (cuBLAS FP8) on the same fp8 bytes, with per-tensor scales.

    The arrays hold the fp8 and bf16 bits (CuPy has neither type); torch views them
    without a copy. B is N x K row-major, which is the K x N column-major operand
    _scaled_mm wants (B.t()). Per-tensor scales of one: the product is timed, not
    checked, and cuBLAS's time does not depend on the scales' values. Its default, exact
    accumulation (use_fast_accum=False) is the like-for-like baseline.
    """
    import torch

    device = "cuda" if xp.__name__ == "cupy" else "cpu"  # NumPy arrays: a test on the host

    def view(name: str, bits: Any, dtype: Any) -> Any:
        return torch.as_tensor(arrays[name].view(bits), device=device).view(dtype)

    a = view("A", xp.uint8, torch.float8_e4m3fn)
    b = view("B", xp.uint8, torch.float8_e4m3fn)
    c = view("C", xp.int16, torch.bfloat16)
    one = _ONES.get(a.device)
    if one is None:  # made once per device: a fill kernel per call would be timed with cuBLAS
        one = _ONES[a.device] = torch.ones((), dtype=torch.float32, device=a.device)
    try:  # straight into C: a copy of C after the product would be timed too
        torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, out=c)
    except TypeError:  # a torch without the out= form
        out = torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        c.copy_(out[0] if isinstance(out, tuple) else out)  # torch < 2.4 returned (out, amax)
