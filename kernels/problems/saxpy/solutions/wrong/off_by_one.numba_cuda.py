# WRONG: the guard is i < n - 1, so the last element of out is never written.
from numba import cuda


@cuda.jit
def saxpy(alpha, x, y, out, n):
    i = cuda.grid(1)
    if i < n - 1:
        out[i] = alpha * x[i] + y[i]
