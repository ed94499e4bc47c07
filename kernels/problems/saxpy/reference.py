"""Inputs, reference and library baseline for saxpy (out = alpha * x + y)."""

from __future__ import annotations

from typing import Any

import numpy as np


def generate(params: dict, rng: np.random.Generator) -> dict:
    n = int(params["n"])
    # |alpha| in [1.5, 3) with a random sign: never 1 (a kernel that drops alpha fails)
    # and never 0 (a kernel that drops x fails).
    alpha = np.float32(rng.uniform(1.5, 3.0) * rng.choice([-1.0, 1.0]))
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.uniform(-2.0, 2.0, n).astype(np.float32)
    return {"alpha": alpha, "x": x, "y": y}


def reference(inputs: dict, params: dict) -> dict:
    alpha = float(inputs["alpha"])
    x = np.asarray(inputs["x"], dtype=np.float64)
    y = np.asarray(inputs["y"], dtype=np.float64)
    return {"out": (alpha * x + y).astype(np.float32)}


def baseline(arrays: dict, params: dict, xp: Any) -> None:
    # `arrays` holds every argument by name, the scalar alpha included.
    out = arrays["out"]
    xp.multiply(arrays["x"], xp.float32(arrays["alpha"]), out=out)
    xp.add(out, arrays["y"], out=out)
