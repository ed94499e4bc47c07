"""Inputs and reference for cpu_simd_sum (out[0] = x[0] + ... + x[n-1]) on one core."""

from __future__ import annotations

import numpy as np


def generate(params: dict, rng: np.random.Generator) -> dict:
    n = int(params["n"])
    # Positive values: the relative tolerance means the same thing at every size, and a
    # dropped element moves the sum by at least 0.5. float32 draws keep generation fast.
    x = rng.random(n, dtype=np.float32) + np.float32(0.5)
    return {"x": x}


def reference(inputs: dict, params: dict) -> dict:
    total = inputs["x"].astype(np.float64).sum()
    return {"out": np.array([total], dtype=np.float32)}
