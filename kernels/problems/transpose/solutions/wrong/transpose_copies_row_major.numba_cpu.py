# WRONG: walks the output's memory in the input's order, so it copies the matrix as it
# is (element k of inp becomes element k of out) instead of transposing it. A single
# row or column looks right, since its transpose has the same memory layout.
import numba


@numba.njit(parallel=True)
def transpose(inp, out, rows, cols):
    for r in numba.prange(rows):
        for c in range(cols):
            k = r * cols + c
            out[k // rows, k % rows] = inp[r, c]
