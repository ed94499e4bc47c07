# WRONG: eight accumulators, but the loop stops at the last multiple of 8 and nothing
# adds the remaining n % 8 elements. Right only when n is a multiple of 8.
import numba
import numpy as np


@numba.njit
def simd_sum(x, out, n):
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = np.float32(0.0)
    for i in range(0, n - n % 8, 8):
        a0 += x[i]
        a1 += x[i + 1]
        a2 += x[i + 2]
        a3 += x[i + 3]
        a4 += x[i + 4]
        a5 += x[i + 5]
        a6 += x[i + 6]
        a7 += x[i + 7]
    out[0] = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
