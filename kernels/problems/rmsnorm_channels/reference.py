"""Inputs, reference and library baseline for rmsnorm_channels (RMSNorm over axis 1)."""

from __future__ import annotations

from typing import Any

from kplay.kernels.draws import Draws, array_module

EPS = 1e-5


def generate(params: dict, draw: Draws) -> dict:
    b, c, n = int(params["batch"]), int(params["channels"]), int(params["length"])
    xp = draw.xp
    # Each batch item at its own scale, so a kernel that normalises over the wrong axis or
    # mixes batch items is off by far more than the tolerance.
    scale = draw.uniform((b, 1, 1), 0.5, 4.0, dtype="float64")
    x = (scale * draw.normal((b, c, n), 0.0, 1.0, dtype="float64")).astype(xp.float32)
    # The first column is all zeros: without eps, 0 / sqrt(0) is NaN.
    x[:, :, 0] = 0.0
    w = draw.uniform(c, 0.5, 1.5)
    return {"x": x, "w": w, "eps": EPS}


def reference(inputs: dict, params: dict) -> dict:
    xp = array_module(inputs["x"])
    x = inputs["x"].astype(xp.float64)
    w = inputs["w"].astype(xp.float64)
    eps = float(xp.float32(inputs["eps"]))  # what the kernel receives
    rms = xp.sqrt((x * x).mean(axis=1, keepdims=True) + eps)
    return {"out": (x / rms * w[None, :, None]).astype(xp.float32)}


def baseline(arrays: dict, params: dict, xp: Any) -> None:
    x, w = arrays["x"], arrays["w"]
    rms = xp.sqrt((x * x).mean(axis=1, keepdims=True) + xp.float32(EPS))
    xp.multiply(x / rms, w[None, :, None], out=arrays["out"])
