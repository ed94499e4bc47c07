"""Checking the output of one timed repetition: one pass, no temporaries, pass or fail.

The test is compare()'s (|got - expected| <= atol + rtol * |expected|, NaN never passes),
reduced to counts: elements outside the tolerance, and how many of those still hold the
poison (never written). On the host it is a Numba loop over the two arrays; on the GPU a
CuPy reduction, enqueued on the stream after the repetition's end event, whose count is
read once the timing loop is over. A failing repetition is then worded from the counts
(and on the host by compare(), which names the first wrong element).
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Any

import numpy as np

from kplay.kernels import dtypes, exact
from kplay.kernels.arrays import bits_dtype, poison_bits, poison_value, to_numpy
from kplay.kernels.problem import Tolerance

# On the GPU both counts travel in one int64: the wrong elements in the low 32 bits, the
# unwritten ones above them (an output has far fewer than 2**32 elements).
_SHIFT = 32
# The GPU count's parallel form: at most this many rows, each of at least this many elements.
_ROWS = 2048
_ROW_MIN = 4096


@lru_cache(maxsize=1)
def _host_counter():  # type: ignore[no-untyped-def]
    import numba

    @numba.njit(nogil=True, cache=False)
    def count(got, bits, expected, atol, rtol, poison):  # type: ignore[no-untyped-def]
        bad = 0
        unwritten = 0
        first = -1
        for i in range(got.size):
            g = float(got[i])
            e = float(expected[i])
            if abs(g - e) <= atol + rtol * abs(e):
                continue
            bad += 1
            if first < 0:
                first = i
            if bits[i] == poison:  # the raw bits: a NaN the kernel wrote is not the poison
                unwritten += 1
        return bad, unwritten, first

    return count


# Kept apart from the count above: the per-repetition count runs on the hot path, and
# tracking the largest errors there (a division per element) stops LLVM vectorising the
# loop: 18 ms instead of 4.5 ms for 11M float32 elements on the 2-vCPU VM.
@lru_cache(maxsize=1)
def _host_errors():  # type: ignore[no-untyped-def]
    import numba

    @numba.njit(nogil=True, cache=False)
    def errors(got, expected, atol, rtol):  # type: ignore[no-untyped-def]
        bad = 0
        max_abs = 0.0
        max_rel = 0.0
        for i in range(got.size):
            e = float(expected[i])
            diff = abs(float(got[i]) - e)
            scale = abs(e)
            if not diff <= atol + rtol * scale:
                bad += 1
                continue
            if diff > max_abs:
                max_abs = diff
            rel = diff / max(scale, 1e-30)
            if rel > max_rel:
                max_rel = rel
        return bad, max_abs, max_rel

    return errors


def errors_on_host(got: np.ndarray, expected: np.ndarray, tol: Tolerance) -> dict | None:
    """compare()'s verdict on a passing output in one pass over memory; None if any fails.

    The same test and the same largest errors as compare() gives for an output that is
    right; a wrong one is left to compare(), which words the message.
    """
    if got.shape != expected.shape:
        return None
    if exact.is_exact(tol):  # integers and bool: equal or not (kernels.exact)
        return None if exact.count(got, expected, tol)[0] else dict(exact.compare_ok())
    got, expected = exact.unpacked(got, expected, tol)
    bad, max_abs, max_rel = _host_errors()(
        _numba_friendly(got), _numba_friendly(expected), tol.atol, tol.rtol
    )
    if bad:
        return None
    return {"ok": True, "max_abs_err": max_abs, "max_rel_err": max_rel, "mismatches": 0}


def _numba_friendly(arr: np.ndarray) -> np.ndarray:
    flat = np.ascontiguousarray(arr).reshape(-1)
    # Numba's CPU target has no float16, bfloat16 or float8 arithmetic; the widening is exact.
    narrow = dtypes.is_float(flat.dtype) and flat.dtype.itemsize < 4
    return flat.astype(np.float32) if narrow else flat


def count_on_host(got: np.ndarray, expected: np.ndarray, tol: Tolerance) -> tuple[int, int, int]:
    """(wrong elements, of which unwritten, flat index of the first wrong one or -1)."""
    if got.shape != expected.shape:
        return got.size or 1, 0, 0
    if exact.on_host_only(tol):  # exact and packed types (kernels.exact)
        return exact.count(got, expected, tol)
    dtype = np.dtype(got.dtype)
    bits = np.ascontiguousarray(got).reshape(-1).view(bits_dtype(dtype))
    bad, unwritten, first = _host_counter()(
        _numba_friendly(got),
        bits,
        _numba_friendly(expected),
        tol.atol,
        tol.rtol,
        poison_bits(dtype),
    )
    return int(bad), int(unwritten), int(first)


_DEVICE_PREAMBLE = r"""
template <typename T> __device__ double kplay_value(T x) { return (double)x; }
// An output's element as the integer the poison is compared with: its value for integer
// types, its raw bits for float and double (a NaN the kernel wrote is not the poison).
template <typename T> __device__ long long kplay_bits(T x) { return (long long)x; }
__device__ long long kplay_bits(float x) { return __float_as_int(x); }
__device__ long long kplay_bits(double x) { return __double_as_longlong(x); }
__device__ long long kplay_bad(double g, double e, double atol, double rtol, long long bits,
                               long long poison) {
    if (fabs(g - e) <= atol + rtol * fabs(e)) return 0;
    bool unwritten = bits == poison;
    return unwritten ? ((1LL << 32) | 1LL) : 1LL;
}
"""


@lru_cache(maxsize=1)
def _device_counter():  # type: ignore[no-untyped-def]
    import cupy

    return cupy.ReductionKernel(
        "T got, E expected, float64 atol, float64 rtol, int64 poison",
        "int64 counts",
        "kplay_bad(kplay_value(got), kplay_value(expected), atol, rtol, kplay_bits(got), poison)",
        "a + b",
        "counts = a",
        "0",
        "kplay_rep_check",
        preamble=_DEVICE_PREAMBLE,
    )


def count_on_device(got: Any, expected: Any, tol: Tolerance) -> Any:
    """Enqueue the count for a CuPy output; returns a 0-d device array (see decode())."""
    info = exact.declared(tol)
    if info is not None and (info.extension or exact.on_host_only(tol)):
        # Counted at once, not enqueued: exact and packed types by kernels.exact, and
        # bfloat16 and float8 (held by CuPy as their bits) on the host.
        import cupy

        if info.extension:
            got = dtypes.as_declared(cupy.asnumpy(got), info.name)
        bad, unwritten, _first = count_on_host(got, to_numpy(expected), tol)
        return cupy.asarray(np.int64(bad | (unwritten << _SHIFT)))
    dtype = np.dtype(got.dtype)
    poison = _device_poison(dtype)
    got, expected = got.reshape(-1), expected.reshape(-1)
    if dtype == np.float16:  # widened exactly, so the kernel only meets C++'s own types
        got = got.astype(np.float32)
    if np.dtype(expected.dtype) == np.float16:
        expected = expected.astype(np.float32)
    args = (float(tol.atol), float(tol.rtol), poison)
    # A reduction to one value runs on a single block in CuPy (14 ms for 16M elements on
    # an H200): reduce rows of a 2-D view in parallel, one block each, then add the rows.
    n = int(got.size)
    rows = min(_ROWS, n // _ROW_MIN)
    if rows < 2:
        return _device_counter()(got, expected, *args)
    main = (n // rows) * rows
    counts = _device_counter()(
        got[:main].reshape(rows, -1), expected[:main].reshape(rows, -1), *args, axis=1
    ).sum()
    if main < n:
        counts += _device_counter()(got[main:], expected[main:], *args)
    return counts


@cache
def _device_poison(dtype: np.dtype) -> int:
    """The poison as kplay_bits() sees it: the integer value for integer outputs, the
    raw bits for float32/float64, and for float16 the bits of the poison once the device
    has widened it to float32 as count_on_device() widens the output (asked once)."""
    if dtype.kind != "f":
        return int(poison_value(dtype))
    if dtype != np.float16:
        return poison_bits(dtype)
    import cupy

    ints = cupy.full(1, poison_bits(dtype), dtype=bits_dtype(dtype))
    return int(ints.view(dtype).astype(np.float32).view(np.int32).get()[0])


def decode(packed: int) -> tuple[int, int]:
    """(wrong elements, of which unwritten) from count_on_device()'s value."""
    return packed & ((1 << _SHIFT) - 1), packed >> _SHIFT
