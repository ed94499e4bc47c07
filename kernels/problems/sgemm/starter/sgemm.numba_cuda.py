# C = A @ B with A (M x K), B (K x N) and C (M x N), float32 2-D arrays.
# The default launch gives each 32x8 block one 32x32 tile of C: thread (x, y)
# owns column x of the tile in rows y, y+8, y+16 and y+24.
from numba import cuda, float32

TILE = 32


@cuda.jit
def sgemm(A, B, C, M, N, K):
    col = cuda.blockIdx.x * TILE + cuda.threadIdx.x
    for i in range(cuda.threadIdx.y, TILE, cuda.blockDim.y):
        row = cuda.blockIdx.y * TILE + i
        if row < M and col < N:
            acc = float32(0.0)
            # TODO: add A[row, k] * B[k, col] over every k.
            C[row, col] = acc
