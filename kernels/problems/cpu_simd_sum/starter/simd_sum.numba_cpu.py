# out[0] = x[0] + x[1] + ... + x[n-1], on one core, in float32.
import numba
import numpy as np


@numba.njit
def simd_sum(x, out, n):
    acc = np.float32(0.0)
    # ---- TODO -------------------------------------------------------------------
    # 1. Add every x[i] into acc, run it, and note the GB/s on the card.
    # 2. Break the chain of dependent additions: several accumulators, or
    #    fastmath=True in the decorator so the compiler may reorder the sum.
    # ---- end of TODO ------------------------------------------------------------
    out[0] = acc
