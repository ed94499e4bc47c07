# a[i] = b[i] + s * c[i] for every 0 <= i < n: the STREAM triad, on the CPU.
# b and c are inputs (the checker compares them after the run); write only a.
import numba


@numba.njit(fastmath=True)
def triad(a, b, c, s, n):
    for i in range(n):
        # ---- TODO ---------------------------------------------------------------
        # Write a[i]. Then make the loop parallel: numba.prange instead of range,
        # and parallel=True in the decorator. Compare the two runs on the card.
        # ---- end of TODO --------------------------------------------------------
        pass
