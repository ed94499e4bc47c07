# out[0] = x[0] + x[1] + ... + x[n-1]. out[0] is zero when the kernel starts.
# Default launch: min(ceil_div(n, 2048), 1024) blocks of 256 threads.
import numba
from numba import cuda

THREADS = 256  # shared arrays need a size known when the kernel compiles


@cuda.jit
def reduce_sum(x, out, n):
    partial = cuda.shared.array(THREADS, numba.float32)
    tid = cuda.threadIdx.x

    # Each thread adds up its own slice of x: elements i, i + stride, i + 2 * stride, ...
    acc = numba.float32(0.0)
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        acc += x[i]

    # TODO: store acc in partial[tid], combine the block's values as a tree (half the
    # threads add the other half's values, cuda.syncthreads() between steps), then let
    # thread 0 add the block's total to out[0] with cuda.atomic.add(out, 0, total).
