# Correct, and a cautionary tale: sixteen hand-written accumulators *and* fastmath. The
# strided pattern (a0 takes x[i], a1 takes x[i + 1], ...) invites LLVM to vectorise across
# the accumulators with shuffles instead of along the array, and the result can be slower
# than either the plain fastmath loop or the scalar version. Look at the assembly (the
# card's compiler output) before trusting a transformation to help.
import numba
import numpy as np


@numba.njit(fastmath=True)
def simd_sum(x, out, n):
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = np.float32(0.0)
    a8 = a9 = a10 = a11 = a12 = a13 = a14 = a15 = np.float32(0.0)
    m = n - n % 16
    for i in range(0, m, 16):
        a0 += x[i]
        a1 += x[i + 1]
        a2 += x[i + 2]
        a3 += x[i + 3]
        a4 += x[i + 4]
        a5 += x[i + 5]
        a6 += x[i + 6]
        a7 += x[i + 7]
        a8 += x[i + 8]
        a9 += x[i + 9]
        a10 += x[i + 10]
        a11 += x[i + 11]
        a12 += x[i + 12]
        a13 += x[i + 13]
        a14 += x[i + 14]
        a15 += x[i + 15]
    for i in range(m, n):
        a0 += x[i]
    low = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
    high = ((a8 + a9) + (a10 + a11)) + ((a12 + a13) + (a14 + a15))
    out[0] = low + high
