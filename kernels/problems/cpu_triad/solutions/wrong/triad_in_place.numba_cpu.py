# WRONG: computes the triad into b (as an in-place update would) and copies it to a. a is
# right, but the input b has been overwritten, which the checker sees when it compares the
# inputs after the run.
import numba


@numba.njit(fastmath=True)
def triad(a, b, c, s, n):
    for i in range(n):
        b[i] = b[i] + s * c[i]
        a[i] = b[i]
