# counts[v] += 1 for every byte v of data; counts is zero before the launch.
# Default launch: at most 1024 blocks of 256 threads; walk data with a grid-stride loop.
from numba import cuda


@cuda.jit
def byte_histogram(data, counts, n):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        # TODO: add one to counts[data[i]], atomically (many threads share a counter).
        pass
