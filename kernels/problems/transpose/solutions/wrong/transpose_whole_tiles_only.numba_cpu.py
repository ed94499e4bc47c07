# WRONG: the tile loops stop at the last whole 32x32 tile, so when rows or cols is
# not a multiple of 32 the leftover band of the matrix is never copied.
import numba

TILE = 32


@numba.njit(parallel=True)
def transpose(inp, out, rows, cols):
    for band in numba.prange(rows // TILE):
        r0 = band * TILE
        for c0 in range(0, cols - TILE + 1, TILE):
            for c in range(c0, c0 + TILE):
                for r in range(r0, r0 + TILE):
                    out[c, r] = inp[r, c]
