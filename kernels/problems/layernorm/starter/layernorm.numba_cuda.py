# LayerNorm over rows: out[r, c] = (x[r, c] - mean) / sqrt(var + eps) * gamma[c] + beta[c],
# where mean and var are the mean and the variance (divided by cols) of row r.
# The default launch gives each row one block of 256 threads.
import math

from numba import cuda, float32

THREADS = 256


@cuda.jit
def layernorm(x, gamma, beta, out, eps, rows, cols):
    buf = cuda.shared.array(THREADS, float32)
    r = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    # TODO: reduce the row sum through buf (a tree, with cuda.syncthreads() between
    #       steps) and divide by cols for the mean; then the sum of (x[r, c] - mean)^2 the
    #       same way for the variance; then write every out[r, c] for
    #       c in range(tid, cols, THREADS), with 1 / math.sqrt(var + eps).
    buf[tid] = float32(0.0) * math.sqrt(eps)
