# Cache-blocked transpose: 32x32 tiles keep both the rows being read and the rows
# being written in L1; bands of tile rows are spread over the cores.
import numba

TILE = 32


@numba.njit(parallel=True, cache=False)
def transpose(inp, out, rows, cols):
    bands = (rows + TILE - 1) // TILE
    for band in numba.prange(bands):
        r0 = band * TILE
        r1 = min(r0 + TILE, rows)
        for c0 in range(0, cols, TILE):
            c1 = min(c0 + TILE, cols)
            for c in range(c0, c1):
                for r in range(r0, r1):
                    out[c, r] = inp[r, c]
