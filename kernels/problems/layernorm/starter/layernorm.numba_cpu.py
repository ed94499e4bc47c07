# LayerNorm over rows: out[r, c] = (x[r, c] - mean) / sqrt(var + eps) * gamma[c] + beta[c],
# where mean and var are the mean and the variance (divided by cols) of row r.
import numba


@numba.njit(parallel=True)
def layernorm(x, gamma, beta, out, eps, rows, cols):
    for r in numba.prange(rows):
        # TODO: the mean of row r, then the mean of (x[r, c] - mean)^2 (never
        #       E[x^2] - mean^2: some rows sit near 1000 with a spread of 1), then every
        #       out[r, c]. math.sqrt is there for the square root.
        pass
