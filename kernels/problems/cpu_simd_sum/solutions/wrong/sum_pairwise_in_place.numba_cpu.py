# WRONG: a pairwise (tree) sum is a fine idea, but this one folds the array onto itself,
# x[i] += x[i + half], destroying the input. The total in out[0] is right; the checker
# compares the inputs after the run and rejects the kernel.
import numba


@numba.njit
def simd_sum(x, out, n):
    m = n
    while m > 1:
        half = (m + 1) // 2
        for i in range(m - half):
            x[i] += x[i + half]
        m = half
    out[0] = x[0]
