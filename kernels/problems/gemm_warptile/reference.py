"""Inputs, reference and cuBLAS baseline for the warptiling exercise (SGEMM)."""

from __future__ import annotations

from typing import Any

import numpy as np


def generate(params: dict, rng: np.random.Generator) -> dict:
    m, n, k = int(params["M"]), int(params["N"]), int(params["K"])
    # Both signs, full mantissas: a missing term or a wrong index shows at once.
    a = rng.uniform(-1.0, 1.0, size=(m, k)).astype(np.float32)
    b = rng.uniform(-1.0, 1.0, size=(k, n)).astype(np.float32)
    return {"A": a, "B": b}


def reference(inputs: dict, params: dict) -> dict:
    a = inputs["A"].astype(np.float64)
    b = inputs["B"].astype(np.float64)
    return {"C": np.ascontiguousarray(a @ b).astype(np.float32)}


def baseline(arrays: dict, params: dict, xp: Any) -> None:
    # float32 matmul in CuPy goes to cuBLAS SGEMM; TF32 only if CUPY_TF32=1 is set.
    xp.matmul(arrays["A"], arrays["B"], out=arrays["C"])
