"""Inputs and reference for the STREAM triad, a = b + s * c."""

from __future__ import annotations

import numpy as np

from kplay.kernels.draws import Draws, array_module


def generate(params: dict, draw: Draws) -> dict:
    n = int(params["n"])
    # Signed values with full mantissas: a kernel that drops the scale, swaps b and c or
    # reads the wrong element cannot match by accident.
    b = draw.uniform(n, -1.0, 1.0)
    c = draw.uniform(n, -1.0, 1.0)
    s = np.float32(draw.scalar(0.5, 4.0))
    return {"b": b, "c": c, "s": s}


def reference(inputs: dict, params: dict) -> dict:
    xp = array_module(inputs["b"])
    out = inputs["c"].astype(xp.float64)  # b + s * c in float64, in one buffer
    out *= float(inputs["s"])
    out += inputs["b"]
    return {"a": out.astype(xp.float32)}
