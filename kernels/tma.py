"""Tensor maps (TMA descriptors) and thread-block clusters named in a cell's launch line.

A Hopper kernel that copies tiles with the Tensor Memory Accelerator receives, instead of
a pointer, a `const __grid_constant__ CUtensorMap` describing the array: its shape and
strides, the box (tile) one copy moves, the element type, the shared-memory swizzle. The
host encodes it with `cuTensorMapEncodeTiled`; here the engine does that for the arrays
the launch line names, so a learner writes

    // kplay: grid=(n/4096) block=128 smem=16384 tma.src=(4096) tma.dst=(4096)
    // kplay: grid=(N/64,M/64) block=128 cluster=(2,1) tma.A=(64,64) tma.A.swizzle=128B

and the kernel's parameter for `A` is that descriptor. Boxes are written in the array's
index order (rows, then columns), as the problem's shapes are; the driver wants the
innermost dimension first, which `encode()` takes care of.

This module is pure data and checks, plus `encode()`, which needs `cuda-bindings` and a
device pointer: the descriptor holds the array's address, so it is encoded for each
buffer the harness launches on (and cached by address).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

SWIZZLES = {"none": 0, "32B": 32, "64B": 64, "128B": 128}
L2_PROMOTIONS = {"none": 0, "64B": 64, "128B": 128, "256B": 256}
INTERLEAVES = {"none": 0, "16B": 16, "32B": 32}
OPTIONS = ("swizzle", "l2", "interleave")
# A box is at most 256 elements along each dimension (the driver's limit).
BOX_MAX = 256
MAX_RANK = 5
# Element types by the problem's dtype name, as CUtensorMapDataType names them.
DTYPES = {
    "uint8": "UINT8",
    "int8": "UINT8",  # the copy moves bits: a signed byte travels as an unsigned one
    "uint16": "UINT16",
    "int16": "UINT16",
    "uint32": "UINT32",
    "int32": "INT32",
    "uint64": "UINT64",
    "int64": "INT64",
    "float16": "FLOAT16",
    "float32": "FLOAT32",
    "float64": "FLOAT64",
    "bfloat16": "BFLOAT16",
}
_ITEMSIZE = {"bfloat16": 2}


class TmaError(ValueError):
    """A tensor map or cluster the launch line asks for cannot be made; the text says why."""


@dataclass(frozen=True)
class TensorMapSpec:
    """One array's descriptor as the launch line asks for it (formulas evaluated)."""

    name: str
    box: tuple[int, ...]
    swizzle: str = "none"
    l2: str = "none"
    interleave: str = "none"
    index: int = -1  # the argument's position in the kernel's parameter list
    dtype: str = ""


def itemsize(dtype: str) -> int:
    return _ITEMSIZE.get(dtype) or np.dtype(dtype).itemsize


def check_option(name: str, option: str, value: str) -> str:
    """An option's value as written, if it is one the driver knows."""
    table = {"swizzle": SWIZZLES, "l2": L2_PROMOTIONS, "interleave": INTERLEAVES}.get(option)
    if table is None:
        raise TmaError(
            f"tma.{name}.{option}: unknown option; a tensor map takes {', '.join(OPTIONS)}"
        )
    if value not in table:
        raise TmaError(f"tma.{name}.{option}={value}: choose one of {', '.join(table)}")
    return value


def check_spec(spec: TensorMapSpec, shape: tuple[int, ...]) -> None:
    """The limits the driver enforces, said in the learner's terms before it is asked."""
    where = f"tma.{spec.name}"
    if spec.dtype not in DTYPES:
        raise TmaError(f"{where}: {spec.name} is {spec.dtype}; TMA copies {', '.join(DTYPES)}")
    if len(spec.box) != len(shape):
        raise TmaError(
            f"{where}: the box has {len(spec.box)} dimension(s), {spec.name} has "
            f"{len(shape)} ({'x'.join(map(str, shape))}); give one size per dimension"
        )
    if not 1 <= len(shape) <= MAX_RANK:
        raise TmaError(f"{where}: TMA handles 1 to {MAX_RANK} dimensions, not {len(shape)}")
    for axis, b in enumerate(spec.box):
        if not 1 <= b <= BOX_MAX:
            raise TmaError(f"{where}: box size {b} in dimension {axis} is outside 1..{BOX_MAX}")
    size = itemsize(spec.dtype)
    inner = spec.box[-1] * size
    if inner % 16:
        raise TmaError(
            f"{where}: the box's last dimension is {inner} bytes ({spec.box[-1]} x {size}); "
            "TMA moves rows in multiples of 16 bytes"
        )
    row = shape[-1] * size
    if len(shape) > 1 and row % 16:
        raise TmaError(
            f"{where}: a row of {spec.name} is {row} bytes; TMA needs every stride to be a "
            "multiple of 16 bytes"
        )
    span = SWIZZLES[spec.swizzle]
    if span and spec.interleave == "none" and inner > span:
        raise TmaError(
            f"{where}: with swizzle={spec.swizzle} the box's last dimension may be at most "
            f"{span} bytes; it is {inner}"
        )


def check_cluster(cluster: tuple[int, ...], grid: tuple[int, ...]) -> tuple[int, int, int]:
    dims = (tuple(int(c) for c in cluster) + (1, 1, 1))[:3]
    if len(cluster) > 3 or any(c < 1 for c in dims):
        raise TmaError(f"cluster={tuple(cluster)}: give 1 to 3 positive sizes")
    grid3 = (tuple(int(g) for g in grid) + (1, 1, 1))[:3]
    for axis, c, g in zip("xyz", dims, grid3, strict=True):
        if g % c:
            raise TmaError(
                f"cluster={tuple(cluster)}: the grid's {axis} ({g}) is not a multiple of the "
                f"cluster's ({c}); a grid is made of whole clusters"
            )
    blocks = dims[0] * dims[1] * dims[2]
    if blocks > 16:
        raise TmaError(f"cluster={tuple(cluster)}: {blocks} blocks; a cluster holds at most 16")
    return dims[0], dims[1], dims[2]


def encode(spec: TensorMapSpec, address: int, shape: tuple[int, ...]) -> bytes:
    """The 128-byte CUtensorMap of an array at `address` with `shape` (row-major)."""
    from cuda.bindings import driver

    check_spec(spec, shape)
    if address % 16:
        raise TmaError(f"tma.{spec.name}: the array's address is not 16-byte aligned")
    size = itemsize(spec.dtype)
    dims = list(reversed(shape))  # innermost first
    strides = []
    step = size
    for extent in dims[:-1]:
        step *= extent
        strides.append(step)
    if not strides:
        # A 1-D tensor has no stride; an empty list would reach the driver as a null
        # pointer, so one unread entry (a legal stride: a multiple of 16 bytes) goes instead.
        strides = [max(16, -(-dims[0] * size // 16) * 16)]
    box = list(reversed(spec.box))
    kinds = driver.CUtensorMapDataType
    swizzle = getattr(driver.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{spec.swizzle.upper()}")
    promotion = "NONE" if spec.l2 == "none" else f"L2_{spec.l2}"
    l2 = getattr(driver.CUtensorMapL2promotion, f"CU_TENSOR_MAP_L2_PROMOTION_{promotion}")
    interleave = getattr(
        driver.CUtensorMapInterleave, f"CU_TENSOR_MAP_INTERLEAVE_{spec.interleave.upper()}"
    )
    u64, u32 = driver.cuuint64_t, driver.cuuint32_t
    err, tmap = driver.cuTensorMapEncodeTiled(
        getattr(kinds, f"CU_TENSOR_MAP_DATA_TYPE_{DTYPES[spec.dtype]}"),
        len(dims),
        address,
        [u64(d) for d in dims],
        [u64(s) for s in strides],
        [u32(b) for b in box],
        [u32(1)] * len(dims),
        interleave,
        swizzle,
        l2,
        driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    )
    if err != driver.CUresult.CUDA_SUCCESS:
        raise TmaError(f"tma.{spec.name}: the driver refused the tensor map ({_name(err)})")
    return _bytes_of(tmap)


def _name(err: Any) -> str:
    return getattr(err, "name", str(err))


def _bytes_of(tmap: Any) -> bytes:
    """The descriptor's 128 bytes, read from the object cuda-bindings returns."""
    import ctypes

    data = (ctypes.c_char * 128).from_address(int(tmap.getPtr()))
    return bytes(data)
