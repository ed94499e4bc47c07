# Correct, and slow on more than one core: each thread adds straight into partial[c], and
# the compiler keeps a store to memory in every iteration. The threads' slots are 8 bytes
# apart, inside one 64-byte cache line, so the cores keep stealing that line from each
# other (false sharing) although no two threads ever touch the same element.
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
