# One block of 256 threads per row, three walks over the row: the sum (for the mean),
# the sum of squared differences from the mean (for the variance), then the outputs.
# Each sum combines per-thread partials with a tree in shared memory.
import math

from numba import cuda, float32

THREADS = 256  # must match the launch's block size (a power of two)


@cuda.jit(device=True)
def block_sum(buf, v, tid):
    buf[tid] = v
    cuda.syncthreads()
    step = THREADS // 2
    while step > 0:
        if tid < step:
            buf[tid] += buf[tid + step]
        cuda.syncthreads()
        step //= 2
    total = buf[0]
    cuda.syncthreads()  # everyone has read buf[0] before buf is reused
    return total


@cuda.jit
def layernorm(x, gamma, beta, out, eps, rows, cols):
    buf = cuda.shared.array(THREADS, float32)
    r = cuda.blockIdx.x
    tid = cuda.threadIdx.x

    s = float32(0.0)
    for c in range(tid, cols, THREADS):
        s += x[r, c]
    mean = block_sum(buf, s, tid) / float32(cols)

    q = float32(0.0)
    for c in range(tid, cols, THREADS):
        d = x[r, c] - mean
        q += d * d
    var = block_sum(buf, q, tid) / float32(cols)
    rstd = float32(1.0) / math.sqrt(var + eps)

    for c in range(tid, cols, THREADS):
        out[r, c] = (x[r, c] - mean) * rstd * gamma[c] + beta[c]
