"""The host half of kernels.draws: the generator's loops, compiled by Numba (cached on disk).

Kept apart so that importing kernels.draws (every problem's reference does) costs no
Numba import; the arithmetic is the one kernels.draws documents, step for step.
"""

from __future__ import annotations

import numba
import numpy as np

_G = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_ONE = np.uint64(1)
_TWO = np.uint64(2)
_LOW24 = np.uint64(0xFFFFFF)
_S16, _S27, _S30, _S31, _S40 = (np.uint64(v) for v in (16, 27, 30, 31, 40))
_UNIT = 5.9604644775390625e-08  # 2**-24, exactly
_SQRT3 = 1.7320508075688772  # math.sqrt(3.0)


@numba.njit(inline="always", cache=True)
def _mix(z):  # type: ignore[no-untyped-def]
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@numba.njit(inline="always", cache=True)
def _uniform_at(key, i, lo, span):  # type: ignore[no-untyped-def]
    z = _mix(key + (np.uint64(i) + _ONE) * _G)
    return lo + span * (float(z >> _S40) * _UNIT)


@numba.njit(inline="always", cache=True)
def _normal_at(key, i, mean, std):  # type: ignore[no-untyped-def]
    c = np.uint64(i) * _TWO
    a = _mix(key + (c + _ONE) * _G)
    b = _mix(key + (c + _TWO) * _G)
    total = (a >> _S40) + ((a >> _S16) & _LOW24) + (b >> _S40) + ((b >> _S16) & _LOW24)
    return mean + std * ((float(total) * _UNIT - 2.0) * _SQRT3)


@numba.njit(nogil=True, cache=True)
def uniform(out, key, lo, span):  # type: ignore[no-untyped-def]
    for i in range(out.size):
        out[i] = _uniform_at(key, i, lo, span)


@numba.njit(nogil=True, cache=True)
def normal(out, key, mean, std):  # type: ignore[no-untyped-def]
    for i in range(out.size):
        out[i] = _normal_at(key, i, mean, std)


@numba.njit(nogil=True, cache=True)
def bits(out, key):  # type: ignore[no-untyped-def]
    for i in range(out.size):
        out[i] = _mix(key + (np.uint64(i) + _ONE) * _G)


@numba.njit(nogil=True, cache=True)
def uniform_at(out, key, lo, span, at):  # type: ignore[no-untyped-def]
    for j in range(at.size):
        out[j] = _uniform_at(key, at[j], lo, span)


@numba.njit(nogil=True, cache=True)
def normal_at(out, key, mean, std, at):  # type: ignore[no-untyped-def]
    for j in range(at.size):
        out[j] = _normal_at(key, at[j], mean, std)
