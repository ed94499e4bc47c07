# A flat loop that LLVM vectorises (fastmath lets it use FMA); prange splits it
# across the cores.
import numba


@numba.njit(parallel=True, fastmath=True)
def saxpy(alpha, x, y, out, n):
    for i in numba.prange(n):
        out[i] = alpha * x[i] + y[i]
