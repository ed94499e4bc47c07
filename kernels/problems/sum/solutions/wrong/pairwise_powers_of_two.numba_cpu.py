# WRONG: pairwise summation that halves the length each round with m // 2. When a
# round's length is odd, its last element is dropped, so the result is right only when
# n is a power of two.
import numba
import numpy as np


@numba.njit
def reduce_sum(x, out, n):
    buf = x.astype(np.float64)  # a copy: x itself stays untouched
    m = n
    while m > 1:
        half = m // 2
        for i in range(half):
            buf[i] += buf[i + half]
        m = half
    out[0] = buf[0]
