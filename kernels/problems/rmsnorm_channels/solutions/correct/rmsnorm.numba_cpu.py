# Batch items in parallel; for each, the squares are added position by position along the
# contiguous axis (a vectorisable inner loop), then every row is scaled.
import math

import numba
import numpy as np


@numba.njit(parallel=True)
def rmsnorm(x, w, out, eps, batch, channels, length):
    for b in numba.prange(batch):
        acc = np.zeros(length, dtype=np.float64)
        for c in range(channels):
            for l in range(length):
                v = np.float64(x[b, c, l])
                acc[l] += v * v
        for l in range(length):
            acc[l] = 1.0 / math.sqrt(acc[l] / channels + eps)
        for c in range(channels):
            for l in range(length):
                out[b, c, l] = x[b, c, l] * acc[l] * w[c]
