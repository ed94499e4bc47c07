# Row-wise softmax: out[r, c] = exp(x[r, c] - m) / sum_j exp(x[r, j] - m), where m
# is the maximum of row r. The default launch gives each row one block of 256
# threads; rows may be longer or shorter than the block.
import math

from numba import cuda, float32

THREADS = 256


@cuda.jit
def softmax(x, out, rows, cols):
    buf = cuda.shared.array(THREADS, float32)
    r = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    m = float32(-math.inf)
    # TODO: reduce the row maximum into m through buf (mind the barriers), then the
    #       sum of math.exp(x[r, c] - m), then write out[r, c] for
    #       c in range(tid, cols, THREADS).
