"""The element types a problem may declare, and what the harness needs to know of each.

NumPy has no bfloat16, no float8 and no 4-bit types: those come from `ml_dtypes` (the
NumPy extension types JAX and TensorFlow use), so that a bfloat16 array on the host is a
real array of bfloat16 values with correct rounding and arithmetic through float32.

Each type is one of:

- a float compared within a tolerance (float16, bfloat16, float32, float64, float8_e4m3fn,
  float8_e5m2); an output starts as a NaN of a marked bit pattern where the type has one
  (kernels.arrays);
- an integer or bool compared exactly (int8 ... uint64, bool);
- a packed 4-bit type (int4x2, uint4x2, float4_e2m1x2): a uint8 array carrying two
  values a byte, element 2j in the low nibble (bits 0-3) and element 2j+1 in the high
  nibble (bits 4-7), along the last axis. The declared shape is that of the bytes.

The low-precision floats have a default tolerance (DEFAULT_TOLERANCES): one unit in the
last place, rtol = eps, atol = the smallest subnormal. Two results rounded correctly to
the type from nearby real values differ by at most one unit, so a kernel that computes in
float32 and rounds once passes, and one that loses another bit does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class DType:
    name: str  # as problem.toml writes it
    storage: np.dtype  # what the host array holds (uint8 for the packed types)
    kind: str  # "float", "int", "bool" or "packed"
    # For a packed type, the type of one unpacked value (ml_dtypes int4, uint4, float4_e2m1fn).
    value: np.dtype | None = None
    torch: str = ""  # the torch dtype a Triton kernel receives

    @property
    def exact(self) -> bool:
        """Compared bit for bit: integers, bool, and the packed integer types."""
        return self.kind in ("int", "bool") or (self.kind == "packed" and not self.float_values)

    @property
    def float_values(self) -> bool:
        """Its values are floating point (compared within a tolerance)."""
        if self.kind == "packed":
            assert self.value is not None
            return self.value == np.dtype(ml_dtypes.float4_e2m1fn)
        return self.kind == "float"

    @property
    def extension(self) -> bool:
        """Stored as an ml_dtypes type, which Numba, CuPy and torch.from_numpy cannot take."""
        return self.storage.type.__module__.startswith("ml_dtypes")


def _dt(name: str, storage: Any, kind: str, torch: str, value: Any = None) -> DType:
    return DType(name, np.dtype(storage), kind, None if value is None else np.dtype(value), torch)


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        _dt("float16", np.float16, "float", "float16"),
        _dt("bfloat16", ml_dtypes.bfloat16, "float", "bfloat16"),
        _dt("float32", np.float32, "float", "float32"),
        _dt("float64", np.float64, "float", "float64"),
        _dt("float8_e4m3fn", ml_dtypes.float8_e4m3fn, "float", "float8_e4m3fn"),
        _dt("float8_e5m2", ml_dtypes.float8_e5m2, "float", "float8_e5m2"),
        _dt("int8", np.int8, "int", "int8"),
        _dt("int16", np.int16, "int", "int16"),
        _dt("int32", np.int32, "int", "int32"),
        _dt("int64", np.int64, "int", "int64"),
        _dt("uint8", np.uint8, "int", "uint8"),
        _dt("uint16", np.uint16, "int", "uint16"),
        _dt("uint32", np.uint32, "int", "uint32"),
        _dt("uint64", np.uint64, "int", "uint64"),
        _dt("bool", np.bool_, "bool", "bool"),
        _dt("int4x2", np.uint8, "packed", "uint8", ml_dtypes.int4),
        _dt("uint4x2", np.uint8, "packed", "uint8", ml_dtypes.uint4),
        _dt("float4_e2m1x2", np.uint8, "packed", "uint8", ml_dtypes.float4_e2m1fn),
    )
}
NAMES = tuple(DTYPES)

# The types whose own rounding dominates a float32 computation of the result: one unit in
# the last place at the expected value (rtol = eps), and the spacing of the subnormals
# near zero (atol). float32 and float64 have none: how far a result may drift depends on
# the algorithm (a sum of n terms), and the problem says it.
_LOW_PRECISION = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1x2")


def _finfo(name: str) -> Any:
    d = DTYPES[name]
    return ml_dtypes.finfo(d.value if d.kind == "packed" else d.storage)


DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    name: (float(_finfo(name).smallest_subnormal), float(_finfo(name).eps))
    for name in _LOW_PRECISION
}


def get(name: str) -> DType:
    return DTYPES[name]


def of_storage(dtype: Any) -> DType | None:
    """The DType whose host arrays have this NumPy dtype (packed types are plain uint8)."""
    dtype = np.dtype(dtype)
    for d in DTYPES.values():
        if d.storage == dtype and d.kind != "packed":
            return d
    return None


def is_float(dtype: Any) -> bool:
    """A floating-point NumPy dtype, the ml_dtypes ones included (their `kind` is not 'f')."""
    d = of_storage(dtype)
    return d is not None and d.kind == "float"


def finfo(dtype: Any) -> Any:
    return ml_dtypes.finfo(np.dtype(dtype))


def bits_int(dtype: Any, unsigned: bool = False) -> np.dtype:
    """The integer type as wide as `dtype` (its raw bits)."""
    return np.dtype(f"{'u' if unsigned else ''}int{8 * np.dtype(dtype).itemsize}")


def kernel_view(arr: np.ndarray) -> np.ndarray:
    """What a NumPy-based kernel (Numba on the CPU or the simulator) receives for `arr`: the
    array itself, or for an ml_dtypes type a view of its bits as unsigned integers (Numba
    has no bfloat16 or float8 arrays; the kernel decodes the bits)."""
    d = of_storage(arr.dtype)
    if d is not None and d.extension:
        return arr.view(bits_int(arr.dtype, unsigned=True))
    return arr


def as_declared(arr: Any, name: str) -> Any:
    """`arr` viewed as the declared type `name` when it holds the same bits in another type
    (a bfloat16 output read back from a device as uint16); as is otherwise."""
    storage = DTYPES[name].storage
    if arr.dtype != storage and arr.dtype.itemsize == storage.itemsize:
        return arr.view(storage)
    return arr


# ------------------------------------------------------------------ packed 4-bit


def unpack4(packed: Any, name: str) -> Any:
    """The values of a packed 4-bit array, last axis doubled: element 2j from the low
    nibble of byte j, element 2j+1 from its high nibble. Integers come back as int8 or
    uint8, float4_e2m1 values as float32."""
    d = DTYPES[name]
    assert d.kind == "packed" and d.value is not None
    xp = _xp(packed)
    raw = xp.asarray(packed).view(xp.uint8)
    nibbles = xp.stack([raw & 0x0F, raw >> 4], axis=-1).reshape(*raw.shape[:-1], -1)
    if d.value == np.dtype(ml_dtypes.uint4):
        return nibbles.astype(xp.uint8)
    if d.value == np.dtype(ml_dtypes.int4):
        signed = nibbles.astype(xp.int8)
        return xp.where(signed >= 8, signed - 16, signed).astype(xp.int8)
    return xp.asarray(FP4_VALUES)[nibbles.astype(xp.int64)]


def pack4(values: Any, name: str) -> Any:
    """The inverse of unpack4: values (last axis even) rounded to the type and packed."""
    d = DTYPES[name]
    assert d.kind == "packed" and d.value is not None
    xp = _xp(values)
    values = xp.asarray(values)
    if values.shape[-1] % 2:
        raise ValueError(f"{name}: the last axis holds pairs; got length {values.shape[-1]}")
    if d.value == np.dtype(ml_dtypes.float4_e2m1fn):
        nib = _fp4_nibbles(values, xp)
    else:
        info = ml_dtypes.iinfo(d.value)
        ints = values.astype(xp.int64)
        if bool(((ints < int(info.min)) | (ints > int(info.max))).any()):
            raise ValueError(f"{name}: values must lie in [{info.min}, {info.max}]")
        nib = (ints & 0x0F).astype(xp.uint8)
    pairs = nib.reshape(*nib.shape[:-1], -1, 2)
    return (pairs[..., 0] | (pairs[..., 1] << 4)).astype(xp.uint8)


# The 16 values of float4_e2m1 by nibble: sign bit 3, two exponent bits, one mantissa bit.
FP4_VALUES = np.array(
    [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32
)


def _fp4_nibbles(values: Any, xp: Any) -> Any:
    """Each value rounded to the nearest float4_e2m1 (ties to the even nibble), as nibbles;
    beyond 6 in magnitude it saturates (the type has no infinity), as ml_dtypes rounds."""
    v = values.astype(xp.float64)
    mag = xp.minimum(xp.abs(v), 6.0)
    table = xp.asarray(FP4_VALUES[:8].astype(np.float64))
    dist = xp.abs(mag[..., None] - table)
    best = dist.min(axis=-1, keepdims=True)
    ties = dist <= best
    # Of the nearest ones, the even nibble (its mantissa bit clear), else the lowest.
    even = ties & (xp.arange(8) % 2 == 0)
    pick = xp.where(even.any(axis=-1), xp.argmax(even, axis=-1), xp.argmax(ties, axis=-1))
    sign = xp.signbit(v)  # a negative value that rounds to zero keeps its sign: -0
    return (pick + 8 * sign).astype(xp.uint8)


def _xp(arr: Any) -> Any:
    from kplay.kernels.draws import array_module

    return array_module(arr)
