"""Inputs, reference and library baseline for the warp-shuffle sum (as in `sum`)."""

from __future__ import annotations

from typing import Any

import numpy as np


def generate(params: dict, rng: np.random.Generator) -> dict:
    n = int(params["n"])
    # Strictly positive values: the sum cannot cancel to near zero, so the relative
    # tolerance means the same thing at every size, and every element matters.
    x = rng.uniform(0.5, 1.5, n).astype(np.float32)
    return {"x": x}


def reference(inputs: dict, params: dict) -> dict:
    x = np.asarray(inputs["x"], dtype=np.float64)
    total = np.array([x.sum()], dtype=np.float64)
    return {"out": total.astype(np.float32)}


def baseline(arrays: dict, params: dict, xp: Any) -> None:
    # out has shape (1,); a full reduction gives a 0-d result, so reshape the view.
    xp.sum(arrays["x"], out=arrays["out"].reshape(()))
