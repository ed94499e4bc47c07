# case: each thread returns at once when its element of the output already holds a number
# class: early return
# mode: full
# expect: done
# expect-simulated: done
# evidence: output-lacks Traceback
#
# The per-element version of the bet on a stale output (the CUDA C++ one in
# kernels/problems/vector_add/solutions/cheating/ decides per block). The harness fills
# every output with NaN on the device before every repetition, outside the timed
# region: no thread ever finds its element written, so the kernel adds every element
# every time, and on a GPU it is timed for that.
import math

from numba import cuda


@cuda.jit
def vector_add(a, b, out, n):
    i = cuda.grid(1)
    if i < n and math.isnan(out[i]):
        out[i] = a[i] + b[i]
