"""Inputs and reference for cpu_simd_sum (out[0] = x[0] + ... + x[n-1]) on one core."""

from __future__ import annotations

from kplay.kernels.draws import Draws, array_module


def generate(params: dict, draw: Draws) -> dict:
    n = int(params["n"])
    # Positive values: the relative tolerance means the same thing at every size, and a
    # dropped element moves the sum by at least 0.5.
    x = draw.uniform(n, 0.5, 1.5)
    return {"x": x}


def reference(inputs: dict, params: dict) -> dict:
    x = inputs["x"]
    xp = array_module(x)
    return {"out": x.astype(xp.float64).sum().reshape(1).astype(xp.float32)}
