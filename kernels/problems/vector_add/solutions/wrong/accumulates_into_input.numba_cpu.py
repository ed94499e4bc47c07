# WRONG: adds b into a in place and then copies a to out. out is right, but the input a
# is overwritten, which the checker catches by comparing inputs after the run.
import numba


@numba.njit
def vector_add(a, b, out, n):
    for i in range(n):
        a[i] += b[i]
        out[i] = a[i]
