# out[i] = a[i] + b[i] with the CuTe DSL: one element per thread.
# The launch is the problem's: ceil_div(n, 256) blocks of 256 threads. Each array
# arrives as a cute.Tensor (its pointer and layout), n as a 32-bit integer.
import cutlass
import cutlass.cute as cute


@cute.kernel
def vector_add(a: cute.Tensor, b: cute.Tensor, out: cute.Tensor, n: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    i = bidx * bdim + tidx
    if i < n:  # the last block runs past the end of the vector
        out[i] = a[i] + b[i]
