# Grid-stride partial sums in registers, a shared-memory tree per block (barrier after
# every step), and one atomic add per block into out[0], which starts at zero.
# blockDim.x must be a power of two no larger than MAX_THREADS.
import numba
from numba import cuda

MAX_THREADS = 1024


@cuda.jit
def reduce_sum(x, out, n):
    partial = cuda.shared.array(MAX_THREADS, numba.float32)
    tid = cuda.threadIdx.x

    acc = numba.float32(0.0)
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        acc += x[i]
    partial[tid] = acc
    cuda.syncthreads()

    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s:
            partial[tid] += partial[tid + s]
        cuda.syncthreads()
        s //= 2

    if tid == 0:
        cuda.atomic.add(out, 0, partial[0])
