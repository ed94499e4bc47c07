# Blocks of BLOCK independent chains held in vector registers (see fma_blocked), and the
# blocks shared out over all cores with prange. This is the same shape of work as the
# calibration that measured the card's FP32 roof, so it should land close to it.
import numba
import numpy as np

BLOCK = 128


@numba.njit(parallel=True, fastmath=True)
def fma_chains(x, out, a, b, n, iters):
    blocks = (n + BLOCK - 1) // BLOCK
    for blk in numba.prange(blocks):
        start = blk * BLOCK
        v = np.empty(BLOCK, dtype=np.float32)
        for j in range(BLOCK):
            v[j] = x[min(start + j, n - 1)]
        for _ in range(iters):
            for j in range(BLOCK):
                v[j] = a * v[j] + b
        for j in range(min(BLOCK, n - start)):
            out[start + j] = v[j]
