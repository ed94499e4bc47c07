# Loops swapped: a block of BLOCK independent chains advances one step at a time. BLOCK is
# a constant, so LLVM unrolls the inner loop and keeps the block in vector registers
# (128 floats: eight AVX-512 registers, enough to cover the FMA latency on two pipes).
# One core only; fma_blocked_parallel.numba_cpu.py spreads the blocks over all cores.
import numba
import numpy as np

BLOCK = 128


@numba.njit(fastmath=True)
def fma_chains(x, out, a, b, n, iters):
    for start in range(0, n, BLOCK):
        v = np.empty(BLOCK, dtype=np.float32)
        for j in range(BLOCK):
            # The last block may be partial: pad it with a real value, store only the rest.
            v[j] = x[min(start + j, n - 1)]
        for _ in range(iters):
            for j in range(BLOCK):
                v[j] = a * v[j] + b
        for j in range(min(BLOCK, n - start)):
            out[start + j] = v[j]
