# One (b, l) column per thread; neighbouring threads read neighbouring l, so each step of
# the walk down the channels is a coalesced load.
import math

import numba
from numba import cuda


@cuda.jit
def rmsnorm(x, w, out, eps, batch, channels, length):
    l = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    b = cuda.blockIdx.y
    if l >= length:
        return
    acc = numba.float32(0.0)
    for c in range(channels):
        v = x[b, c, l]
        acc += v * v
    inv = numba.float32(1.0) / math.sqrt(acc / channels + eps)
    for c in range(channels):
        out[b, c, l] = x[b, c, l] * inv * w[c]
