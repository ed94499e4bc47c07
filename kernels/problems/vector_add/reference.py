"""Inputs, reference and library baseline for vector_add (out = a + b)."""

from __future__ import annotations

from typing import Any

from kplay.kernels.draws import Draws, array_module


def generate(params: dict, draw: Draws) -> dict:
    n = int(params["n"])
    # Two different distributions, so a kernel that adds a to itself (or b to itself)
    # cannot pass by accident; neither holds zeros that would hide an unwritten output.
    a = draw.normal(n)
    b = draw.uniform(n, -4.0, 4.0)
    return {"a": a, "b": b}


def reference(inputs: dict, params: dict) -> dict:
    xp = array_module(inputs["a"])
    # float32 -> float64 is exact, so this is the float64 sum, in one pass and one buffer.
    return {"out": xp.add(inputs["a"], inputs["b"], dtype=xp.float64).astype(xp.float32)}


def baseline(arrays: dict, params: dict, xp: Any) -> None:
    xp.add(arrays["a"], arrays["b"], out=arrays["out"])
