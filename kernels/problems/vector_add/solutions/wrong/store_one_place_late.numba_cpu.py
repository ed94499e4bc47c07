# WRONG: the store index runs one ahead of the load index (out[i + 1] = a[i] + b[i]),
# so every element from 1 on receives its left neighbour's sum and the last sum is
# dropped. out[0] is set on its own first, so a one-element vector still passes.
import numba


@numba.njit(parallel=True)
def vector_add(a, b, out, n):
    if n > 0:
        out[0] = a[0] + b[0]
    for i in numba.prange(n - 1):
        out[i + 1] = a[i] + b[i]
