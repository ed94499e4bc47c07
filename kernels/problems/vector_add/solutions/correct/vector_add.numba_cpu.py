# A flat loop that LLVM vectorises; prange splits it across the cores.
import numba


@numba.njit(parallel=True, fastmath=True)
def vector_add(a, b, out, n):
    for i in numba.prange(n):
        out[i] = a[i] + b[i]
