# WRONG: the tree loop runs while s > 1 instead of s > 0, so its last step (adding
# partial[1] into partial[0]) never happens and every block loses half of its values.
# It is right only when thread 1's slice sums to zero, e.g. for a single element.
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
    while s > 1:
        if tid < s:
            partial[tid] += partial[tid + s]
        cuda.syncthreads()
        s //= 2
    if tid == 0:
        cuda.atomic.add(out, 0, partial[0])
