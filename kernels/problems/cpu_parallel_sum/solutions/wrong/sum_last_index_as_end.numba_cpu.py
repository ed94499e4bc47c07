# WRONG: the end of the last chunk is capped at n - 1, the last valid index, but range()
# excludes its end, so x[n - 1] is never added. Every other element is.
import numba
import numpy as np


@numba.njit(parallel=True, fastmath=True)
def parallel_sum(x, out, n):
    chunks = numba.get_num_threads()
    size = (n + chunks - 1) // chunks
    partial = np.zeros(chunks, dtype=np.float64)
    for c in numba.prange(chunks):
        lo = min(n - 1, c * size)
        hi = min(n - 1, lo + size)
        acc = 0.0
        for i in range(lo, hi):
            acc += x[i]
        partial[c] = acc
    out[0] = partial.sum()
