# Wrong: the mean square is taken along the last, contiguous axis (over l) instead of over
# the channels, the usual layout assumption of a row-wise RMSNorm carried over unchanged.
import math

import numba


@numba.njit
def rmsnorm(x, w, out, eps, batch, channels, length):
    for b in range(batch):
        for c in range(channels):
            acc = 0.0
            for l in range(length):
                acc += x[b, c, l] * x[b, c, l]
            inv = 1.0 / math.sqrt(acc / length + eps)
            for l in range(length):
                out[b, c, l] = x[b, c, l] * inv * w[c]
