# out[i] = alpha * x[i] + y[i] for every 0 <= i < n.
# Default launch: ceil_div(n, 256) blocks of 256 threads, one element per thread.
from numba import cuda


@cuda.jit
def saxpy(alpha, x, y, out, n):
    i = cuda.grid(1)  # this thread's global index
    # TODO: write out[i] = alpha * x[i] + y[i] where i < n. Leave x and y untouched.
