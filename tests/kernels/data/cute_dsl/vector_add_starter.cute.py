# out[i] = a[i] + b[i] for every 0 <= i < n, written with the CuTe DSL.
# Default launch: ceil_div(n, 256) blocks of 256 threads. Each array arrives as a
# cute.Tensor (index it like a list: a[i]); n is a 32-bit integer.
import cutlass
import cutlass.cute as cute


@cute.kernel
def vector_add(a: cute.Tensor, b: cute.Tensor, out: cute.Tensor, n: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    i = bidx * bdim + tidx  # noqa: F841 - yours to use
    # TODO: guard with i < n, then store a[i] + b[i] into out[i].
