"""Inputs, reference and library baseline for byte_histogram (counts of the 256 bytes)."""

from __future__ import annotations

from typing import Any

from kplay.kernels.draws import Draws, array_module

PEAK = 32  # the value half of the bytes take (a space, in text)


def generate(params: dict, draw: Draws) -> dict:
    n = int(params["n"])
    xp = draw.xp
    spread = draw.integers(n, 0, 255, "uint8")
    coin = draw.uniform(n, 0.0, 1.0)
    data = xp.where(coin < 0.5, xp.uint8(PEAK), spread).astype(xp.uint8)
    # The ends of the range: a kernel that drops byte 0 or byte 255 shows on every case.
    data[0] = 255
    if n > 1:
        data[-1] = 0
    return {"data": data}


def reference(inputs: dict, params: dict) -> dict:
    xp = array_module(inputs["data"])
    return {"counts": xp.bincount(inputs["data"], minlength=256).astype(xp.uint32)}


def baseline(arrays: dict, params: dict, xp: Any) -> None:
    arrays["counts"][...] = xp.bincount(arrays["data"], minlength=256).astype(xp.uint32)
