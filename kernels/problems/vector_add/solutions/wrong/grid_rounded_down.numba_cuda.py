# WRONG: the launch divides n by the block size with floor division, so when n is not a
# multiple of 256 the last partial block is never launched and the tail of out stays
# unwritten. The kernel body itself is fine; only sizes that are multiples of 256 pass.
# kplay: grid=n//256 block=256
from numba import cuda


@cuda.jit
def vector_add(a, b, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = a[i] + b[i]
