# WRONG: eps is added after the square root, 1 / (sqrt(var) + eps), instead of inside it,
# 1 / sqrt(var + eps). For a variance near 1 the two differ by a few parts in a million
# and pass; a constant row (var = 0) still gives finite outputs. But on row 2 of the
# cases, spread 1e-3 and variance 1e-6 (below eps = 1e-5), sqrt(var) + eps is 1.01e-3
# where sqrt(var + eps) is 3.3e-3: every output of that row is three times too far
# from the mean.
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
    rstd = float32(1.0) / (math.sqrt(var) + eps)  # eps outside the square root

    for c in range(tid, cols, THREADS):
        out[r, c] = (x[r, c] - mean) * rstd * gamma[c] + beta[c]
