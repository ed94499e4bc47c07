# out[0] = x[0] + x[1] + ... + x[n-1], on every core: one chunk of x per thread.
import numba
import numpy as np

PAD = 1  # distance, in float64 slots, between two chunks' entries in `partial`


@numba.njit(parallel=True)
def parallel_sum(x, out, n):
    chunks = numba.get_num_threads()
    size = (n + chunks - 1) // chunks
    partial = np.zeros(chunks * PAD, dtype=np.float64)
    for c in numba.prange(chunks):
        lo = min(n, c * size)
        hi = min(n, lo + size)
        # ---- TODO -------------------------------------------------------------
        # Add x[lo], ..., x[hi - 1] into partial[c * PAD]. Then time it with PAD = 1
        # and PAD = 16, and with a local accumulator written to partial once.
        # ---- end of TODO ------------------------------------------------------
    out[0] = partial.sum()
