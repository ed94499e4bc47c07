# out[i] = alpha * x[i] + y[i] for every 0 <= i < n.
# Default launch: ceil_div(n, BLOCK) programs, each one handling BLOCK consecutive elements.
import triton
import triton.language as tl


@triton.jit
def saxpy(alpha, x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    # TODO: build the mask for offsets past n, load x and y with it, and store
    # alpha * x + y into out_ptr + offsets.
