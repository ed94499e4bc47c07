# WRONG: splits the work into 8 chunks of n // 8 elements by hand. The division rounds
# down, so the last n % 8 elements belong to no chunk and are never written (and for
# n < 8 nothing is written at all). prange alone would have split the loop correctly.
import numba

CHUNKS = 8


@numba.njit(parallel=True, fastmath=True)
def triad(a, b, c, s, n):
    size = n // CHUNKS
    for k in numba.prange(CHUNKS):
        for i in range(k * size, (k + 1) * size):
            a[i] = b[i] + s * c[i]
