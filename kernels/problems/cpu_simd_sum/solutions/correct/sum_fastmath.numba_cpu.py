# The one-accumulator loop with fastmath=True. Allowed to reassociate, LLVM rewrites it
# as four 16-lane vector accumulators (with AVX-512; fewer lanes on AVX2): 64 partial sums
# updated by wide loads and vector adds, combined once after the loop. The source stays
# one line; the machine code is the many-accumulator version, vectorised.
import numba
import numpy as np


@numba.njit(fastmath=True)
def simd_sum(x, out, n):
    acc = np.float32(0.0)
    for i in range(n):
        acc += x[i]
    out[0] = acc
