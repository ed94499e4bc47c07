"""Inputs, reference and library baseline for the transpose exercise (as in `transpose`)."""

from __future__ import annotations

from typing import Any

from kplay.kernels.draws import Draws, array_module


def generate(params: dict, draw: Draws) -> dict:
    rows, cols = int(params["rows"]), int(params["cols"])
    # Distinct values everywhere, so a misplaced element never matches by accident.
    return {"inp": draw.uniform((rows, cols), -1000.0, 1000.0)}


def reference(inputs: dict, params: dict) -> dict:
    # A transpose moves values without arithmetic, so it is exact in float32.
    inp = inputs["inp"]
    return {"out": array_module(inp).ascontiguousarray(inp.T)}


def baseline(arrays: dict, params: dict, xp: Any) -> None:
    xp.copyto(arrays["out"], arrays["inp"].T)
