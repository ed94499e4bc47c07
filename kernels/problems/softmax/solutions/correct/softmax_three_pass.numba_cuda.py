# One block of 256 threads per row, three passes: the row maximum, the sum of
# exp(x - max), then the outputs. Each reduction combines per-thread partials with
# a tree in shared memory. math.exp on float32 compiles to the accurate expf.
import math

from numba import cuda, float32

THREADS = 256  # must match the launch's block size (a power of two)


@cuda.jit
def softmax(x, out, rows, cols):
    buf = cuda.shared.array(THREADS, float32)
    r = cuda.blockIdx.x
    tid = cuda.threadIdx.x

    m = float32(-math.inf)
    for c in range(tid, cols, THREADS):
        m = max(m, x[r, c])
    buf[tid] = m
    cuda.syncthreads()
    step = THREADS // 2
    while step > 0:
        if tid < step:
            buf[tid] = max(buf[tid], buf[tid + step])
        cuda.syncthreads()
        step //= 2
    m = buf[0]
    cuda.syncthreads()  # everyone has read the max before buf is reused

    s = float32(0.0)
    for c in range(tid, cols, THREADS):
        s += math.exp(x[r, c] - m)
    buf[tid] = s
    cuda.syncthreads()
    step = THREADS // 2
    while step > 0:
        if tid < step:
            buf[tid] += buf[tid + step]
        cuda.syncthreads()
        step //= 2
    inv = float32(1.0) / buf[0]

    for c in range(tid, cols, THREADS):
        out[r, c] = math.exp(x[r, c] - m) * inv
