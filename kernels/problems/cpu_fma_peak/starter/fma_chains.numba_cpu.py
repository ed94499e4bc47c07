# out[i] = x[i] after iters steps of v <- a * v + b, for every 0 <= i < n.
# The flops count on the card is 2 * n * iters: one FMA per element per step.
import numba


@numba.njit(fastmath=True)
def fma_chains(x, out, a, b, n, iters):
    for i in range(n):
        v = x[i]
        # ---- TODO ---------------------------------------------------------------
        # Apply v = a * v + b, iters times, then store v in out[i]. Run it, note where
        # the card puts it, then rearrange the loops so that many independent chains
        # advance together (the hints show the way to the FMA roof).
        # ---- end of TODO --------------------------------------------------------
