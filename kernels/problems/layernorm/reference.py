"""Inputs, reference and library baseline for the row-wise LayerNorm."""

from __future__ import annotations

from typing import Any

from kplay.kernels.draws import Draws, array_module

EPS = 1e-5
BIG_MEAN = 1000.0  # rows 0 and 3: mean +-1000, spread 1
TINY_SPREAD = 1e-3  # row 2: spread 1e-3 (variance 1e-6, below eps)


def generate(params: dict, draw: Draws) -> dict:
    rows, cols = int(params["rows"]), int(params["cols"])
    xp = draw.xp
    # Most rows: their own mean in [-5, 5] and spread in [0.5, 4].
    offset = draw.uniform((rows, 1), -5.0, 5.0, dtype="float64")
    spread = draw.uniform((rows, 1), 0.5, 4.0, dtype="float64")
    noise = draw.normal((rows, cols), 0.0, 1.0, dtype="float64")
    # The first rows are the hard ones:
    # 0 and 3: mean +-1000 and spread 1. E[x^2] is about 1e6, where a float32 holds
    #   steps of 0.06: E[x^2] - mean^2 in float32 loses the variance (about 1) to rounding.
    # 1: every value the same, variance 0: without eps, 0 / sqrt(0) is NaN.
    # 2: spread 1e-3, variance 1e-6, below eps: eps outside the square root
    #   (sqrt(var) + eps instead of sqrt(var + eps)) is off by a factor of three.
    offset[0, 0], spread[0, 0] = BIG_MEAN, 1.0
    if rows > 1:
        offset[1, 0], spread[1, 0] = 3.0, 0.0
    if rows > 2:
        offset[2, 0], spread[2, 0] = 0.5, TINY_SPREAD
    if rows > 3:
        offset[3, 0], spread[3, 0] = -BIG_MEAN, 1.0
    x = (offset + spread * noise).astype(xp.float32)
    gamma = draw.uniform(cols, 0.5, 1.5)
    beta = draw.uniform(cols, -0.5, 0.5)
    return {"x": x, "gamma": gamma, "beta": beta, "eps": EPS}


def reference(inputs: dict, params: dict) -> dict:
    xp = array_module(inputs["x"])
    x = inputs["x"].astype(xp.float64)
    eps = float(xp.float32(inputs["eps"]))  # what the kernel receives
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    y = (x - mean) / xp.sqrt(var + eps)
    g = inputs["gamma"].astype(xp.float64)
    b = inputs["beta"].astype(xp.float64)
    return {"out": y * g[None, :] + b[None, :]}


def baseline(arrays: dict, params: dict, xp: Any) -> None:
    x = arrays["x"]
    mean = x.mean(axis=1, keepdims=True)
    d = x - mean
    var = (d * d).mean(axis=1, keepdims=True)
    y = d / xp.sqrt(var + xp.float32(EPS))
    xp.add(y * arrays["gamma"][None, :], arrays["beta"][None, :], out=arrays["out"])
