# Shared-memory tiled SGEMM: a 32x8 block computes a 32x32 tile of C, each thread
# four rows of one column, walking K in 32-wide tiles that are zero-filled past the
# edges of A and B. One value of B read from shared memory feeds four FMAs.
from numba import cuda, float32

TILE = 32
ROWS_PER_THREAD = 4  # TILE // blockDim.y with the default 32x8 block


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
            As[i, tx] = A[r, ka] if r < M and ka < K else float32(0.0)
            kb = k0 + i
            Bs[i, tx] = B[kb, col] if kb < K and col < N else float32(0.0)
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
