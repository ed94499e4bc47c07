# out[0] = x[0] + x[1] + ... + x[n-1], on the CPU.
import numba


@numba.njit(fastmath=True)
def reduce_sum(x, out, n):
    total = 0.0  # a float64 accumulator: rounding stays small even for long vectors
    for i in range(n):
        # TODO: add x[i] to total.
        pass
    out[0] = total
