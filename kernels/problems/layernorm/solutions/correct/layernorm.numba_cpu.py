# Rows are spread over the cores. Per row: the mean, then the variance of the differences
# from it (two walks; never E[x^2] - mean^2), both summed in float64, then the outputs.
import math

import numba
import numpy as np


@numba.njit(parallel=True, fastmath=True)
def layernorm(x, gamma, beta, out, eps, rows, cols):
    for r in numba.prange(rows):
        s = 0.0
        for c in range(cols):
            s += x[r, c]
        mean = s / cols
        q = 0.0
        for c in range(cols):
            d = x[r, c] - mean
            q += d * d
        rstd = 1.0 / math.sqrt(q / cols + eps)
        m32 = np.float32(mean)
        r32 = np.float32(rstd)
        for c in range(cols):
            out[r, c] = (x[r, c] - m32) * r32 * gamma[c] + beta[c]
