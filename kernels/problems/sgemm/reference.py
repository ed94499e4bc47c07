"""Inputs, reference and library baseline for single-precision GEMM."""

from __future__ import annotations

from typing import Any

from kplay.kernels.draws import Draws, array_module


def generate(params: dict, draw: Draws) -> dict:
    m, n, k = int(params["M"]), int(params["N"]), int(params["K"])
    # Full-mantissa values of both signs: rounding the inputs (TF32, fp16) shows up,
    # and a wrong index or a missing term moves the sum far outside the tolerance.
    a = draw.uniform((m, k), -1.0, 1.0)
    b = draw.uniform((k, n), -1.0, 1.0)
    return {"A": a, "B": b}


def reference(inputs: dict, params: dict) -> dict:
    xp = array_module(inputs["A"])
    a = inputs["A"].astype(xp.float64)
    b = inputs["B"].astype(xp.float64)
    return {"C": xp.ascontiguousarray(a @ b).astype(xp.float32)}


def baseline(arrays: dict, params: dict, xp: Any) -> None:
    xp.matmul(arrays["A"], arrays["B"], out=arrays["C"])
