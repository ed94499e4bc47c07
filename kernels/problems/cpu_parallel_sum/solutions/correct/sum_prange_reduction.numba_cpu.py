# Numba recognises `acc += ...` inside a prange loop as a reduction: every thread gets a
# private accumulator and Numba combines them after the loop. The chunking, the private
# totals and the final combination of the other versions, in three lines.
import numba


@numba.njit(parallel=True, fastmath=True)
def parallel_sum(x, out, n):
    acc = 0.0
    for i in numba.prange(n):
        acc += x[i]
    out[0] = acc
