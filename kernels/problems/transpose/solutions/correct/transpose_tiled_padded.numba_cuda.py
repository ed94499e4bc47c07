# Tiled transpose in shared memory with one column of padding against bank
# conflicts; reads and writes of global memory are both coalesced. The loops have
# a constant trip count (the default 32x8 block), so they unroll and each thread's
# four loads are in flight together.
from numba import cuda, float32

TILE = 32
PADDED = TILE + 1
BLOCK_ROWS = 8  # blockDim.y of the default launch
PER_THREAD = TILE // BLOCK_ROWS


@cuda.jit
def transpose(inp, out, rows, cols):
    tile = cuda.shared.array((TILE, PADDED), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row0 = cuda.blockIdx.y * TILE
    col0 = cuda.blockIdx.x * TILE

    c = col0 + tx
    for k in range(PER_THREAD):
        i = ty + k * BLOCK_ROWS
        r = row0 + i
        if r < rows and c < cols:
            tile[i, tx] = inp[r, c]
    cuda.syncthreads()

    oc = row0 + tx
    for k in range(PER_THREAD):
        i = ty + k * BLOCK_ROWS
        orow = col0 + i
        if orow < cols and oc < rows:
            out[orow, oc] = tile[tx, i]
