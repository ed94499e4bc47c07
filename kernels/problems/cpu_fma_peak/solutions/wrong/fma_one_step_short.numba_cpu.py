# WRONG: the step loop starts at 1, so every chain gets iters - 1 steps instead of iters.
# With iters = 1 the output is x itself; with a few steps the missing one is still visible.
import numba


@numba.njit(fastmath=True)
def fma_chains(x, out, a, b, n, iters):
    for i in range(n):
        v = x[i]
        for _ in range(1, iters):
            v = a * v + b
        out[i] = v
