# WRONG: tile entries that fall outside A or B are skipped instead of being set to
# zero, so on the last, partial step along K the shared tiles still hold values from
# the previous step (or whatever was in shared memory) and they are added into C.
# Right only when K is a multiple of 32.
from numba import cuda, float32

TILE = 32
ROWS_PER_THREAD = 4


@cuda.jit
def sgemm(A, B, C, M, N, K):
    As = cuda.shared.array((TILE, TILE), float32)
    Bs = cuda.shared.array((TILE, TILE), float32)
    acc = cuda.local.array(ROWS_PER_THREAD, float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    step = cuda.blockDim.y
    row0 = cuda.blockIdx.y * TILE
    col = cuda.blockIdx.x * TILE + tx
    for j in range(ROWS_PER_THREAD):
        acc[j] = float32(0.0)

    for k0 in range(0, K, TILE):
        for i in range(ty, TILE, step):
            r = row0 + i
            ka = k0 + tx
            if r < M and ka < K:
                As[i, tx] = A[r, ka]
            kb = k0 + i
            if kb < K and col < N:
                Bs[i, tx] = B[kb, col]
        cuda.syncthreads()
        for k in range(TILE):
            b = Bs[k, tx]
            for j in range(ROWS_PER_THREAD):
                acc[j] += As[ty + j * step, k] * b
        cuda.syncthreads()

    for j in range(ROWS_PER_THREAD):
        r = row0 + ty + j * step
        if r < M and col < N:
            C[r, col] = acc[j]
