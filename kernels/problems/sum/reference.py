"""Inputs, reference and library baseline for sum (out[0] = x[0] + ... + x[n-1])."""

from __future__ import annotations

from typing import Any

from kplay.kernels.draws import Draws, array_module


def generate(params: dict, draw: Draws) -> dict:
    n = int(params["n"])
    # Strictly positive values: the sum cannot cancel to near zero, so the relative
    # tolerance means the same thing at every size, and every element matters.
    x = draw.uniform(n, 0.5, 1.5)
    return {"x": x}


def reference(inputs: dict, params: dict) -> dict:
    xp = array_module(inputs["x"])
    total = inputs["x"].astype(xp.float64).sum().reshape(1)
    return {"out": total.astype(xp.float32)}


def baseline(arrays: dict, params: dict, xp: Any) -> None:
    # out has shape (1,); a full reduction gives a 0-d result, so reshape the view.
    xp.sum(arrays["x"], out=arrays["out"].reshape(()))
