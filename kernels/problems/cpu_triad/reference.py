"""Inputs and reference for the STREAM triad, a = b + s * c."""

from __future__ import annotations

import numpy as np


def generate(params: dict, rng: np.random.Generator) -> dict:
    n = int(params["n"])
    # Signed values with full mantissas: a kernel that drops the scale, swaps b and c or
    # reads the wrong element cannot match by accident.
    b = rng.uniform(-1.0, 1.0, n).astype(np.float32)
    c = rng.uniform(-1.0, 1.0, n).astype(np.float32)
    s = np.float32(rng.uniform(0.5, 4.0))
    return {"b": b, "c": c, "s": s}


def reference(inputs: dict, params: dict) -> dict:
    b = inputs["b"].astype(np.float64)
    c = inputs["c"].astype(np.float64)
    s = float(inputs["s"])
    return {"a": (b + s * c).astype(np.float32)}
