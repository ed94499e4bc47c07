"""Inputs, reference and library baseline for the transpose exercise (as in `transpose`)."""

from __future__ import annotations

from typing import Any

import numpy as np


def generate(params: dict, rng: np.random.Generator) -> dict:
    rows, cols = int(params["rows"]), int(params["cols"])
    # Distinct values everywhere, so a misplaced element never matches by accident.
    inp = rng.uniform(-1000.0, 1000.0, size=(rows, cols)).astype(np.float32)
    return {"inp": np.ascontiguousarray(inp)}


def reference(inputs: dict, params: dict) -> dict:
    # A transpose moves values without arithmetic, so it is exact in float32.
    return {"out": np.ascontiguousarray(inputs["inp"].T)}


def baseline(arrays: dict, params: dict, xp: Any) -> None:
    xp.copyto(arrays["out"], arrays["inp"].T)
