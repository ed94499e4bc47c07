# out[i] = a[i] + b[i] for every 0 <= i < n.
# Default launch: ceil_div(n, BLOCK) programs, each one handling BLOCK consecutive elements.
import triton
import triton.language as tl


@triton.jit
def vector_add(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n  # the last program runs past the end of the vector
    # TODO: load a and b at `offsets` (pass mask=mask), add them, and store the sum
    # into out_ptr + offsets with the same mask.
