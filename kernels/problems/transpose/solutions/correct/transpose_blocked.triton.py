# Each program loads a BLOCK_R x BLOCK_C tile with row-contiguous loads, transposes
# it in registers (Triton stages it through shared memory) and stores it with
# row-contiguous stores into the output.
import triton
import triton.language as tl


@triton.jit
def transpose(inp_ptr, out_ptr, rows, cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    inside = (r[:, None] < rows) & (c[None, :] < cols)
    tile = tl.load(inp_ptr + r[:, None] * cols + c[None, :], mask=inside)
    # The output tile is indexed [c, r]: its rows are `rows` elements apart.
    out_offsets = c[:, None] * rows + r[None, :]
    tl.store(out_ptr + out_offsets, tl.trans(tile), mask=tl.trans(inside))
