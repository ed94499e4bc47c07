# Correct, and slow: each thread adds straight into partial[c], one dependency chain with a
# store to memory in every iteration. The threads' slots are 8 bytes apart, inside one
# 64-byte cache line, so every store needs the line back from the other core (false
# sharing), although no two threads ever touch the same element. How much that costs on
# top of the chain depends on the machine; sum_padded_slots is the same code without it.
import numba
import numpy as np


@numba.njit(parallel=True)
def parallel_sum(x, out, n):
    chunks = numba.get_num_threads()
    size = (n + chunks - 1) // chunks
    partial = np.zeros(chunks, dtype=np.float64)
    for c in numba.prange(chunks):
        lo = min(n, c * size)
        hi = min(n, lo + size)
        for i in range(lo, hi):
            partial[c] += x[i]
    out[0] = partial.sum()
