# A float64 accumulator: the conversion is free next to the memory traffic, and the
# result stays accurate for any length. prange turns the loop into a parallel reduction.
import numba


@numba.njit(parallel=True, fastmath=True)
def reduce_sum(x, out, n):
    total = 0.0
    for i in numba.prange(n):
        total += x[i]
    out[0] = total
