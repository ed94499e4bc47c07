# Tiled transpose in shared memory with one column of padding against bank
# conflicts; reads and writes of global memory are both coalesced.
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
        if orow < cols and oc < rows:
            out[orow, oc] = tile[tx, i]
