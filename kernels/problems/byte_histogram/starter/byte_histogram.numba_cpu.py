# counts[v] += 1 for every byte v of data; counts is zero before the call.
import numba


@numba.njit
def byte_histogram(data, counts, n):
    for i in range(n):
        # TODO: add one to the counter of data[i].
        pass
