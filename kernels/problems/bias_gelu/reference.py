"""Inputs, reference and library baseline for the fused bias + GELU (erf form)."""

from __future__ import annotations

import math
from typing import Any

from kplay.kernels.draws import Draws, array_module

RSQRT2 = 1.0 / math.sqrt(2.0)


def generate(params: dict, draw: Draws) -> dict:
    rows, cols = int(params["rows"]), int(params["cols"])
    # x + bias spans about [-9, 9]: the negative tail where GELU bends to 0, the knee near
    # -1 where the erf form and the tanh approximation differ most, and the linear part.
    x = draw.normal((rows, cols), 0.0, 3.0)
    bias = draw.uniform(cols, -1.0, 1.0)
    return {"x": x, "bias": bias}


def _erf(v: Any, xp: Any) -> Any:
    """erf in float64 on NumPy (math.erf, element by element) or CuPy (cupyx.scipy)."""
    if xp.__name__ == "numpy":
        return xp.vectorize(math.erf, otypes=[xp.float64])(v)
    from cupyx.scipy.special import erf

    return erf(v)


def reference(inputs: dict, params: dict) -> dict:
    xp = array_module(inputs["x"])
    v = inputs["x"].astype(xp.float64) + inputs["bias"].astype(xp.float64)[None, :]
    return {"out": 0.5 * v * (1.0 + _erf(v * RSQRT2, xp))}


def baseline(arrays: dict, params: dict, xp: Any) -> None:
    v = arrays["x"] + arrays["bias"][None, :]
    if xp.__name__ == "numpy":
        arrays["out"][...] = 0.5 * v * (1.0 + _erf(v * RSQRT2, xp))
        return
    from cupyx.scipy.special import erf

    xp.multiply(0.5 * v, 1.0 + erf(v * xp.float32(RSQRT2)), out=arrays["out"])
