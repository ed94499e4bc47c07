# out[i] = a[i] + b[i] for every 0 <= i < n, on the CPU.
# numba.prange instead of range spreads the loop over the cores (parallel=True).
import numba


@numba.njit(fastmath=True)
def vector_add(a, b, out, n):
    for i in range(n):
        # TODO: write out[i] from a[i] and b[i].
        pass
