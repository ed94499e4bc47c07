# WRONG: exp is applied to x directly, without subtracting the row maximum.
# Mathematically the same, but exp(x) overflows float32 for x above ~88.7 (inf / inf
# is NaN) and underflows to zero for x below ~-103 (0 / 0 is NaN). Passes on inputs
# of modest size, such as zeros.
import math

import numba
import numpy as np


@numba.njit(parallel=True)
def softmax(x, out, rows, cols):
    for r in numba.prange(rows):
        s = np.float32(0.0)
        for c in range(cols):
            e = np.float32(math.exp(x[r, c]))
            out[r, c] = e
            s += e
        for c in range(cols):
            out[r, c] /= s
