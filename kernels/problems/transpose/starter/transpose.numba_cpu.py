# Transpose: out[c, r] = inp[r, c] for a rows x cols input.
import numba


@numba.njit(parallel=True)
def transpose(inp, out, rows, cols):
    for r in numba.prange(rows):
        for c in range(cols):
            # TODO: copy inp[r, c] to its place in out.
            pass
