# Row-at-a-time SGEMM: for each row of C, loop over k outside and j inside, so the
# inner loop streams a row of B and a row of accumulators (vectorised by LLVM).
# Rows are shared out over the cores.
import numba
import numpy as np


@numba.njit(parallel=True, fastmath=True)
def sgemm(A, B, C, M, N, K):
    for i in numba.prange(M):
        row = np.zeros(N, dtype=np.float32)
        for k in range(K):
            a = A[i, k]
            for j in range(N):
                row[j] += a * B[k, j]
        for j in range(N):
            C[i, j] = row[j]
