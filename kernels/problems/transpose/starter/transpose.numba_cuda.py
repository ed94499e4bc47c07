# Transpose: out[c, r] = inp[r, c]. The default launch gives each 32x8 block one
# 32x32 tile of the input: thread (x, y) handles column x of the tile in rows
# y, y+8, y+16 and y+24.
from numba import cuda

TILE = 32


@cuda.jit
def transpose(inp, out, rows, cols):
    c = cuda.blockIdx.x * TILE + cuda.threadIdx.x
    for i in range(cuda.threadIdx.y, TILE, cuda.blockDim.y):
        r = cuda.blockIdx.y * TILE + i
        # TODO: if (r, c) lies inside the input, copy inp[r, c] to out[c, r].
        pass
