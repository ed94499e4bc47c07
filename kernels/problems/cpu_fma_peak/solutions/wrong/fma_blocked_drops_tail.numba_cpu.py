# WRONG: runs only the n // BLOCK whole blocks. When n is not a multiple of BLOCK the last
# partial block is never computed and its elements of out are never written.
import numba
import numpy as np

BLOCK = 128


@numba.njit(fastmath=True)
def fma_chains(x, out, a, b, n, iters):
    for blk in range(n // BLOCK):
        start = blk * BLOCK
        v = np.empty(BLOCK, dtype=np.float32)
        for j in range(BLOCK):
            v[j] = x[start + j]
        for _ in range(iters):
            for j in range(BLOCK):
                v[j] = a * v[j] + b
        for j in range(BLOCK):
            out[start + j] = v[j]
