# prange splits the iterations into one contiguous slice per thread; every core streams
# its own slice, and together they keep enough misses in flight to approach the bus limit.
import numba


@numba.njit(parallel=True, fastmath=True)
def triad(a, b, c, s, n):
    for i in numba.prange(n):
        a[i] = b[i] + s * c[i]
