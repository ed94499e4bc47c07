# One core walks the arrays. LLVM vectorises the loop (fastmath lets it fuse the multiply
# and the add), so the core issues wide loads; what limits it is how many cache misses one
# core can keep in flight, not arithmetic.
import numba


@numba.njit(fastmath=True)
def triad(a, b, c, s, n):
    for i in range(n):
        a[i] = b[i] + s * c[i]
