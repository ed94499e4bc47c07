# WRONG: the store is guarded with the input's bounds (orow < rows, oc < cols)
# instead of the output's (orow < cols, oc < rows). On a square matrix the two are
# the same; on any other shape with a partial edge tile some output elements are
# skipped and others are written outside the matrix.
from numba import cuda, float32

TILE = 32
PADDED = TILE + 1


@cuda.jit
def transpose(inp, out, rows, cols):
    tile = cuda.shared.array((TILE, PADDED), float32)
    tx = cuda.threadIdx.x
    row0 = cuda.blockIdx.y * TILE
    col0 = cuda.blockIdx.x * TILE

    c = col0 + tx
    for i in range(cuda.threadIdx.y, TILE, cuda.blockDim.y):
        r = row0 + i
        if r < rows and c < cols:
            tile[i, tx] = inp[r, c]
    cuda.syncthreads()

    oc = row0 + tx
    for i in range(cuda.threadIdx.y, TILE, cuda.blockDim.y):
        orow = col0 + i
        if orow < rows and oc < cols:
            out[orow, oc] = tile[tx, i]
