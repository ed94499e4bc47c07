# The obvious loop: one element at a time, its iters steps in a row. Every FMA needs the
# result of the previous one, so each step waits for the full FMA latency and one core
# retires a single scalar FMA every few cycles: correct, and a tiny fraction of the roof.
import numba


@numba.njit(fastmath=True)
def fma_chains(x, out, a, b, n, iters):
    for i in range(n):
        v = x[i]
        for _ in range(iters):
            v = a * v + b
        out[i] = v
