# One float32 accumulator and no fastmath: Numba must add in the written order, so each
# addition waits for the previous one. The loop runs at one element per adder latency
# (a few cycles), far below what the memory system could deliver. It is also the least
# accurate order: the running sum grows, and each addition rounds at its scale.
import numba
import numpy as np


@numba.njit
def simd_sum(x, out, n):
    acc = np.float32(0.0)
    for i in range(n):
        acc += x[i]
    out[0] = acc
