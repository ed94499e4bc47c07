# Eight independent accumulators, still scalar and still without fastmath: the core keeps
# eight additions in flight instead of one, so the loop is no longer latency-bound. Every
# addition is a separate scalar instruction, though: no SIMD yet.
import numba
import numpy as np


@numba.njit
def simd_sum(x, out, n):
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = np.float32(0.0)
    m = n - n % 8
    for i in range(0, m, 8):
        a0 += x[i]
        a1 += x[i + 1]
        a2 += x[i + 2]
        a3 += x[i + 3]
        a4 += x[i + 4]
        a5 += x[i + 5]
        a6 += x[i + 6]
        a7 += x[i + 7]
    for i in range(m, n):  # the tail: at most 7 elements
        a0 += x[i]
    out[0] = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
