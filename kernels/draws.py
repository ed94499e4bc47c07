"""Where every input of a run comes from: a counter-based generator, the same on CPU and GPU.

Element i of a stream is a pure function of (seed, stream, i):

    key      = mix(mix(seed) + (stream + 1) * K)        K = 0xD1B54A32D192ED03
    bits(i)  = mix(key + (i + 1) * G)                    G = 0x9E3779B97F4A7C15

all arithmetic modulo 2**64, where `mix` is the SplitMix64 finaliser (Steele, Lea and
Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014; constants of
Stafford's "Mix13"). Because no element depends on another, a GPU draws all of them at
once, and the host can recompute any single one (`Draws.element`) to show what a
mismatching element was fed.

Distributions use only correctly rounded IEEE operations in float64 (no transcendental
functions, no fused multiply-add), so NumPy, Numba and CUDA produce the same bits:

- uniform(lo, hi): u = (bits >> 40) * 2**-24, then lo + (hi - lo) * u, rounded once to
  the output type (float16 goes through float32, as both sides convert it the same way);
- normal(mean, std): the Irwin-Hall sum of four such uniforms (two draws per element, at
  counters 2i and 2i + 1, 24 bits from each half), centred and scaled to variance one:
  z = (s - 2) * sqrt(3); bell-shaped, bounded by |z| < 3.47, then mean + std * z.
- integers(lo, hi): lo + ((bits >> 32) * (hi - lo + 1)) >> 32, exact in uint64 arithmetic
  (NumPy and CuPy alike); bfloat16 and float8 draws are float32 draws rounded once.

A problem's `generate(params, draw)` asks a `Draws` for its arrays; each call takes the
next stream, so the same code gives the same arrays on the host (NumPy) and on the
device (CuPy). Scalars (a kernel argument such as alpha) are drawn on the host.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
STREAM = 0xD1B54A32D192ED03
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
SQRT3 = math.sqrt(3.0)
FLOAT_DTYPES = ("float16", "float32", "float64")
# Drawn in float32 and rounded once to the type (to nearest, ties to even, by ml_dtypes):
# on the host only, since CuPy has no such types (kernels.check keeps their cases there).
LOW_FLOAT_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def mix(z: int) -> int:
    """The SplitMix64 finaliser on a Python int (modulo 2**64)."""
    z &= MASK
    z = ((z ^ (z >> 30)) * _M1) & MASK
    z = ((z ^ (z >> 27)) * _M2) & MASK
    return z ^ (z >> 31)


def stream_key(seed: int, stream: int) -> int:
    return mix(mix(seed) + (stream + 1) * STREAM)


def bits_at(key: int, counter: int) -> int:
    """The 64 bits at one counter of the stream keyed `key`."""
    return mix(key + (counter + 1) * GOLDEN)


def _unit(word: int) -> float:
    return float(word) * 2.0**-24


def uniform_at(key: int, index: int, lo: float, hi: float) -> float:
    """Element `index` of uniform(lo, hi), in float64 before the output rounding."""
    return lo + (hi - lo) * _unit(bits_at(key, index) >> 40)


def normal_at(key: int, index: int, mean: float, std: float) -> float:
    a, b = bits_at(key, 2 * index), bits_at(key, 2 * index + 1)
    total = (a >> 40) + ((a >> 16) & 0xFFFFFF) + (b >> 40) + ((b >> 16) & 0xFFFFFF)
    z = (_unit(total) - 2.0) * SQRT3
    return mean + std * z


def integer_at(key: int, index: int, lo: int, span: int) -> int:
    """Element `index` of integers(lo, lo + span - 1): the top 32 bits scaled to the span."""
    return lo + (((bits_at(key, index) >> 32) * span) >> 32)


def _round(value: float, dtype: str) -> Any:
    if dtype == "float16":
        return np.float16(np.float32(value))
    if dtype in LOW_FLOAT_DTYPES:
        from kplay.kernels import dtypes

        return np.asarray(np.float32(value)).astype(dtypes.get(dtype).storage)[()]
    return np.dtype(dtype).type(value)


def _mix_np(z: np.ndarray) -> np.ndarray:
    """mix() on an array of uint64 (NumPy or CuPy: both wrap modulo 2**64)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_M1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_M2)
    return z ^ (z >> np.uint64(31))


# ------------------------------------------------------------------ host (Numba)


def _host() -> Any:
    """The compiled host loops (kernels.draws_host), imported on first use."""
    from kplay.kernels import draws_host

    return draws_host


# ------------------------------------------------------------------ device (CuPy)

_DEVICE_PREAMBLE = r"""
__device__ __forceinline__ unsigned long long kd_mix(unsigned long long z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
__device__ __forceinline__ unsigned long long kd_bits(unsigned long long key,
                                                       unsigned long long c) {
    return kd_mix(key + (c + 1ULL) * 0x9E3779B97F4A7C15ULL);
}
"""


@lru_cache(maxsize=1)
def _device_kernels():  # type: ignore[no-untyped-def]
    import cupy

    uniform = cupy.ElementwiseKernel(
        "uint64 key, float64 lo, float64 span",
        "T y",
        "double u = (double)(kd_bits(key, (unsigned long long)i) >> 40) * 5.9604644775390625e-08;"
        "y = (T)__dadd_rn(lo, __dmul_rn(span, u));",
        "kplay_draw_uniform",
        preamble=_DEVICE_PREAMBLE,
    )
    normal = cupy.ElementwiseKernel(
        "uint64 key, float64 mean, float64 std",
        "T y",
        "unsigned long long c = 2ULL * (unsigned long long)i;"
        "unsigned long long a = kd_bits(key, c), b = kd_bits(key, c + 1ULL);"
        "unsigned long long s = (a >> 40) + ((a >> 16) & 0xFFFFFFULL)"
        "                     + (b >> 40) + ((b >> 16) & 0xFFFFFFULL);"
        "double z = __dmul_rn(__dadd_rn((double)s * 5.9604644775390625e-08, -2.0),"
        "                     1.7320508075688772);"
        "y = (T)__dadd_rn(mean, __dmul_rn(std, z));",
        "kplay_draw_normal",
        preamble=_DEVICE_PREAMBLE,
    )
    bits = cupy.ElementwiseKernel(
        "uint64 key",
        "uint64 y",
        "y = kd_bits(key, (unsigned long long)i);",
        "kplay_draw_bits",
        preamble=_DEVICE_PREAMBLE,
    )
    return uniform, normal, bits


def is_device_module(xp: Any) -> bool:
    return getattr(xp, "__name__", "") == "cupy"


def on_device(arr: Any) -> bool:
    """Whether `arr` is a CuPy array (lives on the GPU)."""
    return type(arr).__module__.startswith("cupy")


def array_module(*arrays: Any) -> Any:
    """cupy when any of `arrays` lives on the GPU (a CuPy array), else numpy.

    What a problem's reference() calls to write one body for both places.
    """
    if any(on_device(arr) for arr in arrays):
        import cupy

        return cupy
    return np


def _shape(shape: int | tuple[int, ...] | list[int]) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, int | np.integer) else tuple(int(s) for s in shape)


class Draws:
    """The draws of one case's inputs from one seed, as arrays of `xp` (numpy or cupy).

    With `at` (host only: a 1-D array of flat positions), every array draw gives only the
    elements at those positions, as a 1-D array: what an elementwise problem's changed
    input set needs (kernels.rotation), without drawing the rest.
    """

    def __init__(self, seed: int, xp: Any = np, at: np.ndarray | None = None) -> None:
        self.seed = int(seed)
        self.xp = xp
        self.at = None if at is None else np.ascontiguousarray(at, dtype=np.int64)
        if self.at is not None and is_device_module(xp):
            raise ValueError("drawing at given positions is done on the host")
        self._stream = 0
        self.log: list[tuple[str, int, float, float, str]] = []  # (kind, key, a, b, dtype)

    def _next_key(self) -> int:
        key = stream_key(self.seed, self._stream)
        self._stream += 1
        return key

    def _fill(self, kind: str, shape: Any, a: float, b: float, dtype: str) -> Any:
        if dtype in LOW_FLOAT_DTYPES:
            if is_device_module(self.xp):
                raise ValueError(f"{dtype} arrays are drawn on the host (CuPy has no {dtype})")
            from kplay.kernels import dtypes

            drawn = self._fill(kind, shape, a, b, "float32")
            self.log[-1] = (*self.log[-1][:4], dtype)
            return drawn.astype(dtypes.get(dtype).storage)
        if dtype not in FLOAT_DTYPES:
            raise ValueError(
                f"uniform and normal draw floats; {dtype!r} is not one of "
                f"{FLOAT_DTYPES + LOW_FLOAT_DTYPES} (integers come from draw.integers)"
            )
        key = self._next_key()
        self.log.append((kind, key, float(a), float(b), dtype))
        shape = _shape(shape)
        inner = "float32" if dtype == "float16" else dtype
        xp = self.xp
        if is_device_module(xp):
            uniform, normal, _bits = _device_kernels()
            out = xp.empty(shape, dtype=inner)
            if kind == "uniform":
                uniform(np.uint64(key), float(a), float(b) - float(a), out)
            else:
                normal(np.uint64(key), float(a), float(b), out)
        else:
            host = _host()
            out = np.empty(shape if self.at is None else self.at.size, dtype=inner)
            flat = out.reshape(-1)
            first, second = (float(a), float(b) - float(a)) if kind == "uniform" else (a, b)
            if self.at is None:
                fill = host.uniform if kind == "uniform" else host.normal
                fill(flat, np.uint64(key), float(first), float(second))
            else:
                fill = host.uniform_at if kind == "uniform" else host.normal_at
                fill(flat, np.uint64(key), float(first), float(second), self.at)
        return out.astype(xp.float16) if dtype == "float16" else out

    def uniform(self, shape: Any, lo: float, hi: float, dtype: str = "float32") -> Any:
        """An array of `shape` drawn uniformly from [lo, hi]."""
        return self._fill("uniform", shape, lo, hi, dtype)

    def normal(
        self, shape: Any, mean: float = 0.0, std: float = 1.0, dtype: str = "float32"
    ) -> Any:
        """An array of `shape` with a bell-shaped law of this mean and standard deviation."""
        return self._fill("normal", shape, mean, std, dtype)

    def integers(self, shape: Any, lo: int, hi: int, dtype: str = "int32") -> Any:
        """An array of `shape` of integers drawn from lo to hi, both included (at most 2**32
        values apart): the top 32 bits of each draw scaled to the span, exact in uint64."""
        if dtype not in INT_DTYPES:
            raise ValueError(f"integers are drawn as one of {INT_DTYPES}, not {dtype!r}")
        lo, hi = int(lo), int(hi)
        span = hi - lo + 1
        info = np.iinfo(dtype)
        if not (0 < span <= 1 << 32) or lo < info.min or hi > info.max:
            raise ValueError(f"integers({lo}, {hi}) must fit {dtype} and span at most 2**32")
        key = self._next_key()
        self.log.append(("integers", key, float(lo), float(span), dtype))
        xp = self.xp
        if self.at is not None:
            counters = self.at.astype(np.uint64)
        else:
            size = int(np.prod(_shape(shape), dtype=np.int64))
            counters = xp.arange(size, dtype=xp.uint64)
        words = _mix_np(np.uint64(key) + (counters + np.uint64(1)) * np.uint64(GOLDEN))
        scaled = ((words >> np.uint64(32)) * np.uint64(span)) >> np.uint64(32)
        values = (scaled.astype(xp.int64) + lo).astype(dtype)
        return values if self.at is not None else values.reshape(_shape(shape))

    def scalar(self, lo: float, hi: float) -> float:
        """One value drawn uniformly from [lo, hi], as a Python float (on the host)."""
        key = self._next_key()
        return uniform_at(key, 0, float(lo), float(hi))

    def sign(self) -> float:
        """-1.0 or 1.0, with equal chances."""
        key = self._next_key()
        return 1.0 if bits_at(key, 0) >> 63 else -1.0

    def element(self, array: int, index: int) -> Any:
        """Element `index` (flat) of the `array`-th array this object drew, recomputed alone."""
        kind, key, a, b, dtype = self.log[array]
        if kind == "integers":
            return np.dtype(dtype).type(integer_at(key, index, int(a), int(b)))
        value = uniform_at(key, index, a, b) if kind == "uniform" else normal_at(key, index, a, b)
        return _round(value, dtype)


def raw_bits(seed: int, stream: int, count: int, xp: Any = np) -> Any:
    """`count` raw 64-bit words of one stream (the harness's own draws: positions)."""
    key = np.uint64(stream_key(seed, stream))
    if is_device_module(xp):
        out = xp.empty(int(count), dtype=xp.uint64)
        _device_kernels()[2](key, out)
        return out
    out = np.empty(int(count), dtype=np.uint64)
    _host().bits(out, key)
    return out


def positions(seed: int, size: int, count: int, xp: Any = np, stream: int = 0) -> Any:
    """Sorted distinct flat positions in [0, size): `count` draws, duplicates dropped."""
    picks = raw_bits(seed, stream, count, xp) % xp.uint64(size)
    chosen = xp.zeros(int(size), dtype=bool)
    chosen[picks.astype(xp.int64)] = True
    return xp.flatnonzero(chosen).astype(xp.int64)


def warm_up() -> None:
    """Compile the host kernels (a warm process pays it once, before any job)."""
    raw_bits(1, 0, 1)
    for dtype in ("float32", "float64"):
        for draws in (Draws(1), Draws(1, np, at=np.zeros(1, dtype=np.int64))):
            draws.uniform(1, 0.0, 1.0, dtype), draws.normal(1, 0.0, 1.0, dtype)
