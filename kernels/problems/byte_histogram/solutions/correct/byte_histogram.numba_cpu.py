# One private histogram per chunk of the data (no two threads share a counter), then the
# chunks' histograms added up.
import numba
import numpy as np

CHUNKS = 16


@numba.njit(parallel=True)
def byte_histogram(data, counts, n):
    partial = np.zeros((CHUNKS, 256), dtype=np.uint32)
    step = (n + CHUNKS - 1) // CHUNKS
    for c in numba.prange(CHUNKS):
        for i in range(c * step, min(n, (c + 1) * step)):
            partial[c, data[i]] += 1
    for v in range(256):
        total = np.uint32(0)
        for c in range(CHUNKS):
            total += partial[c, v]
        counts[v] = total
