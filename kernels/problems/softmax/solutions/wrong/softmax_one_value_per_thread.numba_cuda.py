# WRONG: each thread handles only the value at its own index instead of striding
# over the row, so rows longer than the block (256) ignore everything past column
# 255: their max and sum are wrong and their tail is never written.
import math

from numba import cuda, float32

THREADS = 256


@cuda.jit
def softmax(x, out, rows, cols):
    buf = cuda.shared.array(THREADS, float32)
    r = cuda.blockIdx.x
    tid = cuda.threadIdx.x

    v = x[r, tid] if tid < cols else float32(-math.inf)
    buf[tid] = v
    cuda.syncthreads()
    step = THREADS // 2
    while step > 0:
        if tid < step:
            buf[tid] = max(buf[tid], buf[tid + step])
        cuda.syncthreads()
        step //= 2
    m = buf[0]
    cuda.syncthreads()

    e = math.exp(v - m) if tid < cols else float32(0.0)
    buf[tid] = e
    cuda.syncthreads()
    step = THREADS // 2
    while step > 0:
        if tid < step:
            buf[tid] += buf[tid + step]
        cuda.syncthreads()
        step //= 2

    if tid < cols:
        out[r, tid] = e / buf[0]
