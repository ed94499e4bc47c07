# WRONG: every thread adds its chunk's total straight into out[0]. out starts undefined
# (the harness fills it with NaN), so the sum is NaN; and even on a zeroed out, two threads
# doing out[0] += at the same moment can lose one of the updates.
import numba


@numba.njit(parallel=True)
def parallel_sum(x, out, n):
    chunks = numba.get_num_threads()
    size = (n + chunks - 1) // chunks
    for c in numba.prange(chunks):
        lo = min(n, c * size)
        hi = min(n, lo + size)
        acc = 0.0
        for i in range(lo, hi):
            acc += x[i]
        out[0] += acc
