# Transpose: out[c, r] = inp[r, c]. Each program owns a BLOCK_R x BLOCK_C tile of
# the input; both matrices are row-major and contiguous.
import triton
import triton.language as tl


@triton.jit
def transpose(inp_ptr, out_ptr, rows, cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    inside = (r[:, None] < rows) & (c[None, :] < cols)
    tile = tl.load(inp_ptr + r[:, None] * cols + c[None, :], mask=inside)
    # TODO: store `tile` into out. Element (r, c) belongs at row c, column r of the
    #       cols x rows output, whose rows are `rows` elements apart. Mask the store too.
