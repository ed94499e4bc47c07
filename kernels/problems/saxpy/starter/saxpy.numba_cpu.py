# out[i] = alpha * x[i] + y[i] for every 0 <= i < n, on the CPU.
import numba


@numba.njit(fastmath=True)
def saxpy(alpha, x, y, out, n):
    for i in range(n):
        # TODO: write out[i]; x and y are inputs and must not change.
        pass
