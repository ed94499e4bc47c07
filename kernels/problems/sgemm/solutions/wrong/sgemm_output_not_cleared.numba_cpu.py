# WRONG: products are accumulated straight into C, which is never cleared first.
# It works only if C already holds zeros; the harness fills outputs with NaN.
import numba


@numba.njit(parallel=True)
def sgemm(A, B, C, M, N, K):
    for i in numba.prange(M):
        for k in range(K):
            a = A[i, k]
            for j in range(N):
                C[i, j] += a * B[k, j]
