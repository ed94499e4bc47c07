# out[i] = a[i] + b[i] for every 0 <= i < n.
# Default launch: ceil_div(n, 256) blocks of 256 threads, one element per thread.
from numba import cuda


@cuda.jit
def vector_add(a, b, out, n):
    i = cuda.grid(1)  # this thread's global index
    # TODO: write out[i] = a[i] + b[i], only where i < n (the last block is partly empty).
