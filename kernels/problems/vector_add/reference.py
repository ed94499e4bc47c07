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
    # The float32 sum is the float64 sum rounded to float32, bit for bit: the sum of two
    # float32 values rounded to float64 (53 bits, at least 2 * 24 + 2) and then to float32
    # gives the same float32 as one correct rounding. So no float64 buffer: on the host the
    # float64 sum and its conversion cost 1.6 s of CPU for the 44.7M-element case of a
    # 2-vCPU VM (first touches of a 358 MB buffer), this 0.08 s (bench/RESULTS.md).
    return {"out": xp.add(inputs["a"], inputs["b"])}


def baseline(arrays: dict, params: dict, xp: Any) -> None:
    xp.add(arrays["a"], arrays["b"], out=arrays["out"])
