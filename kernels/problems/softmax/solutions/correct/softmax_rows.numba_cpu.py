# Rows are spread over the cores. Per row: the maximum, then exp(x - max) written
# straight into out while summing, then one scaling pass, so exp runs once per value.
import math

import numba
import numpy as np


@numba.njit(parallel=True, fastmath=True)
def softmax(x, out, rows, cols):
    for r in numba.prange(rows):
        m = x[r, 0]
        for c in range(1, cols):
            m = max(m, x[r, c])
        s = np.float32(0.0)
        for c in range(cols):
            e = np.float32(math.exp(x[r, c] - m))
            out[r, c] = e
            s += e
        inv = np.float32(1.0) / s
        for c in range(cols):
            out[r, c] *= inv
