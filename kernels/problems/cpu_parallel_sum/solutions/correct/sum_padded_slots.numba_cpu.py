# The same stores in every iteration as sum_shared_slots, but the slots are PAD = 16
# doubles (128 bytes) apart: each thread's slot has a cache line to itself (two, against
# the adjacent-line prefetcher), so the cores no longer fight over it. The dependency
# chain through the slot remains; sum_local_accumulator removes that too.
import numba
import numpy as np

PAD = 16


@numba.njit(parallel=True)
def parallel_sum(x, out, n):
    chunks = numba.get_num_threads()
    size = (n + chunks - 1) // chunks
    partial = np.zeros(chunks * PAD, dtype=np.float64)
    for c in numba.prange(chunks):
        lo = min(n, c * size)
        hi = min(n, lo + size)
        for i in range(lo, hi):
            partial[c * PAD] += x[i]
    out[0] = partial.sum()
