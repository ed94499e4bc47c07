# WRONG: rounds every element of A and B to TF32 (10 mantissa bits, as tensor cores do
# in their TF32 mode) before multiplying. The products lose about three decimal digits,
# and over a long K the sums drift just past the tolerance of a float32 GEMM.
import math

import numba
import numpy as np


@numba.njit(inline="always")
def tf32(x):
    m, e = math.frexp(x)
    return np.float32(math.ldexp(round(m * 2048.0) / 2048.0, e))


@numba.njit(parallel=True)
def sgemm(A, B, C, M, N, K):
    for i in numba.prange(M):
        for j in range(N):
            acc = np.float32(0.0)
            for k in range(K):
                acc += tf32(A[i, k]) * tf32(B[k, j])
            C[i, j] = acc
