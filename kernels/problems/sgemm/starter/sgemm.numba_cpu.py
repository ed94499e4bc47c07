# C = A @ B with A (M x K), B (K x N) and C (M x N), float32 NumPy arrays.
import numba
import numpy as np


@numba.njit(parallel=True, fastmath=True)
def sgemm(A, B, C, M, N, K):
    for i in numba.prange(M):
        row = np.zeros(N, dtype=np.float32)
        # TODO: make row[j] the sum over k of A[i, k] * B[k, j]. Looping k outside j
        #       walks B row by row, which the compiler can vectorise.
        for j in range(N):
            C[i, j] = row[j]
