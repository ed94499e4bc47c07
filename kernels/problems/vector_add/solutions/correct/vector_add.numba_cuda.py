# One element per thread; the grid covers n rounded up to whole blocks.
from numba import cuda


@cuda.jit
def vector_add(a, b, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = a[i] + b[i]
