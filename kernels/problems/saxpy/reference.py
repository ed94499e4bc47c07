"""Inputs, reference and library baseline for saxpy (out = alpha * x + y)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kplay.kernels.draws import Draws, array_module


def generate(params: dict, draw: Draws) -> dict:
    n = int(params["n"])
    # |alpha| in [1.5, 3) with a random sign: never 1 (a kernel that drops alpha fails)
    # and never 0 (a kernel that drops x fails).
    alpha = np.float32(draw.scalar(1.5, 3.0) * draw.sign())
    x = draw.normal(n)
    y = draw.uniform(n, -2.0, 2.0)
    return {"alpha": alpha, "x": x, "y": y}


def reference(inputs: dict, params: dict) -> dict:
    alpha = float(inputs["alpha"])
    xp = array_module(inputs["x"])
    out = inputs["x"].astype(xp.float64)  # alpha * x + y in float64, in one buffer
    out *= alpha
    out += inputs["y"]
    return {"out": out.astype(xp.float32)}


def baseline(arrays: dict, params: dict, xp: Any) -> None:
    # `arrays` holds every argument by name, the scalar alpha included.
    out = arrays["out"]
    xp.multiply(arrays["x"], xp.float32(arrays["alpha"]), out=out)
    xp.add(out, arrays["y"], out=out)
