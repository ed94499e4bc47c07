"""Inputs, reference and library baseline for rgb_to_grey (8-bit RGB to 8-bit grey)."""

from __future__ import annotations

from typing import Any

from kplay.kernels.draws import Draws, array_module

# ITU-R BT.601 luma weights scaled to add up to 256 (0.299, 0.587, 0.114 -> 77, 150, 29).
WEIGHTS = (77, 150, 29)


def generate(params: dict, draw: Draws) -> dict:
    h, w = int(params["height"]), int(params["width"])
    xp = draw.xp
    image = draw.integers((h, w, 3), 0, 255, "uint8")
    # The first pixel white and the last black: the ends of the range, where a missing
    # rounding term or a wrapped product shows.
    image[0, 0, :] = 255
    if h * w > 1:
        image[-1, -1, :] = 0
    return {"image": xp.ascontiguousarray(image)}


def reference(inputs: dict, params: dict) -> dict:
    xp = array_module(inputs["image"])
    img = inputs["image"].astype(xp.int32)
    r, g, b = WEIGHTS
    grey = (r * img[..., 0] + g * img[..., 1] + b * img[..., 2] + 128) >> 8
    return {"grey": grey.astype(xp.uint8)}


def baseline(arrays: dict, params: dict, xp: Any) -> None:
    img = arrays["image"].astype(xp.int32)
    r, g, b = WEIGHTS
    arrays["grey"][...] = ((r * img[..., 0] + g * img[..., 1] + b * img[..., 2] + 128) >> 8).astype(
        xp.uint8
    )
