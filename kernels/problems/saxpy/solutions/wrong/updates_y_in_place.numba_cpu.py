# WRONG: follows BLAS and updates y in place, then copies y to out. out is right, but
# the input y has been overwritten, which the checker catches.
import numba


@numba.njit
def saxpy(alpha, x, y, out, n):
    for i in range(n):
        y[i] += alpha * x[i]
    for i in range(n):
        out[i] = y[i]
