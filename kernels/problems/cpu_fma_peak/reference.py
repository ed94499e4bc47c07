"""Inputs and reference for cpu_fma_peak: iters steps of v <- a * v + b per element."""

from __future__ import annotations

import numpy as np

from kplay.kernels.draws import Draws, array_module


def generate(params: dict, draw: Draws) -> dict:
    n = int(params["n"])
    x = draw.uniform(n, -1.0, 1.0)
    # a < 1 keeps the values bounded (they drift towards b / (1 - a)); drawn per case so
    # that a kernel with constants baked in fails.
    a = np.float32(draw.scalar(0.99, 0.995))
    b = np.float32(draw.scalar(-0.01, 0.01))
    return {"x": x, "a": a, "b": b}


def reference(inputs: dict, params: dict) -> dict:
    # The closed form of the affine recurrence, in float64: v_k = f + a^k (x - f) with the
    # fixed point f = b / (1 - a). It costs one pass whatever iters is.
    a = float(inputs["a"])
    b = float(inputs["b"])
    k = int(params["iters"])
    x = inputs["x"].astype(array_module(inputs["x"]).float64)
    f = b / (1.0 - a)
    return {"out": (f + a**k * (x - f)).astype(np.float32)}
