# Wrong: the chunk length is n // CHUNKS, rounded down, so the last n % CHUNKS bytes are
# never counted (and for n < CHUNKS nothing is).
import numba
import numpy as np

CHUNKS = 16


@numba.njit(parallel=True)
def byte_histogram(data, counts, n):
    partial = np.zeros((CHUNKS, 256), dtype=np.uint32)
    step = n // CHUNKS
    for c in numba.prange(CHUNKS):
        for i in range(c * step, (c + 1) * step):
            partial[c, data[i]] += 1
    for v in range(256):
        total = np.uint32(0)
        for c in range(CHUNKS):
            total += partial[c, v]
        counts[v] = total
