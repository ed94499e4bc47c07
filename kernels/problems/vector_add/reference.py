"""Inputs, reference and library baseline for vector_add (out = a + b)."""

from __future__ import annotations

from typing import Any

import numpy as np


def generate(params: dict, rng: np.random.Generator) -> dict:
    n = int(params["n"])
    # Two different distributions, so a kernel that adds a to itself (or b to itself)
    # cannot pass by accident; neither holds zeros that would hide an unwritten output.
    a = rng.standard_normal(n, dtype=np.float32)
    b = rng.uniform(-4.0, 4.0, n).astype(np.float32)
    return {"a": a, "b": b}


def reference(inputs: dict, params: dict) -> dict:
    a = np.asarray(inputs["a"], dtype=np.float64)
    b = np.asarray(inputs["b"], dtype=np.float64)
    return {"out": (a + b).astype(np.float32)}


def baseline(arrays: dict, params: dict, xp: Any) -> None:
    xp.add(arrays["a"], arrays["b"], out=arrays["out"])
