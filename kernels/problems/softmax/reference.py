"""Inputs, reference and library baseline for the row-wise softmax."""

from __future__ import annotations

from typing import Any

from kplay.kernels.draws import Draws, array_module

NOISE = 4.0  # spread within a row: probabilities over many orders of magnitude


def generate(params: dict, draw: Draws) -> dict:
    rows, cols = int(params["rows"]), int(params["cols"])
    # Each row is shifted by its own offset in [-110, 110]. Row 0 is pinned near +100,
    # where exp overflows float32, and the last row near -105, where exp underflows to
    # zero: a softmax that does not subtract the row maximum fails on both.
    offsets = draw.uniform((rows, 1), -110.0, 110.0, dtype="float64")
    offsets[0, 0] = 100.0
    if rows > 1:
        offsets[-1, 0] = -105.0
    x = offsets + draw.normal((rows, cols), 0.0, NOISE, dtype="float64")
    return {"x": x.astype(draw.xp.float32)}


def reference(inputs: dict, params: dict) -> dict:
    xp = array_module(inputs["x"])
    x = inputs["x"].astype(xp.float64)
    e = xp.exp(x - x.max(axis=1, keepdims=True))
    return {"out": (e / e.sum(axis=1, keepdims=True)).astype(xp.float32)}


def baseline(arrays: dict, params: dict, xp: Any) -> None:
    x, out = arrays["x"], arrays["out"]
    xp.subtract(x, x.max(axis=1, keepdims=True), out=out)
    xp.exp(out, out=out)
    xp.divide(out, out.sum(axis=1, keepdims=True), out=out)
