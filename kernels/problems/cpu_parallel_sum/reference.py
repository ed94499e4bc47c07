"""Inputs and reference for cpu_parallel_sum (out[0] = x[0] + ... + x[n-1]) over threads."""

from __future__ import annotations

import numpy as np


def generate(params: dict, rng: np.random.Generator) -> dict:
    n = int(params["n"])
    # Positive values: the sum cannot cancel, and a dropped element moves it by >= 0.5.
    x = rng.random(n, dtype=np.float32) + np.float32(0.5)
    return {"x": x}


def reference(inputs: dict, params: dict) -> dict:
    total = inputs["x"].astype(np.float64).sum()
    return {"out": np.array([total], dtype=np.float32)}
