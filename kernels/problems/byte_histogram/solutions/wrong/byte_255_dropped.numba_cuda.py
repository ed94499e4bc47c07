# Wrong: the private histogram is cleared and flushed for bins 0..254 only (a loop bound
# written as 255), so byte 255 is never counted.
import numba
from numba import cuda


@cuda.jit
def byte_histogram(data, counts, n):
    local = cuda.shared.array(256, numba.uint32)
    tid = cuda.threadIdx.x
    for v in range(tid, 256, cuda.blockDim.x):
        local[v] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        cuda.atomic.add(local, data[i], numba.uint32(1))
    cuda.syncthreads()
    for v in range(tid, 255, cuda.blockDim.x):
        if local[v]:
            cuda.atomic.add(counts, v, local[v])
