# Row-wise softmax: out[r, c] = exp(x[r, c] - m) / sum_j exp(x[r, j] - m), where m
# is the maximum of row r.
import numba


@numba.njit(parallel=True)
def softmax(x, out, rows, cols):
    for r in numba.prange(rows):
        # TODO: compute the row maximum, the sum of exp(x[r, c] - max) (math.exp),
        #       and write every out[r, c].
        pass
