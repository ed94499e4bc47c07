# Each thread sums its chunk in a local variable (a register) and writes partial[c] once:
# no shared line is touched inside the loop. The slice gives LLVM indices that are never
# negative and fastmath lets it reorder the additions, so each thread's loop is
# vectorised; the threads together are limited by the memory bus.
import numba
import numpy as np


@numba.njit(parallel=True, fastmath=True)
def parallel_sum(x, out, n):
    chunks = numba.get_num_threads()
    size = (n + chunks - 1) // chunks
    partial = np.zeros(chunks, dtype=np.float64)
    for c in numba.prange(chunks):
        lo = min(n, c * size)
        hi = min(n, lo + size)
        part = x[lo:hi]
        acc = 0.0
        for i in range(part.shape[0]):
            acc += part[i]
        partial[c] = acc
    out[0] = partial.sum()
