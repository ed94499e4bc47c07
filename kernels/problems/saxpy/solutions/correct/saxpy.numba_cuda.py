# Grid-stride loop: right for any grid, and with the default grid each thread runs
# the loop body exactly once.
from numba import cuda


@cuda.jit
def saxpy(alpha, x, y, out, n):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, n, stride):
        out[i] = alpha * x[i] + y[i]
