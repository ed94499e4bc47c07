# WRONG: each tile is moved to its mirrored position in the output, but the tile
# itself is stored as it was read, not transposed. Only a 1x1 matrix (or a matrix
# whose tiles are all symmetric, such as all zeros) comes out right.
import triton
import triton.language as tl


@triton.jit
def transpose(inp_ptr, out_ptr, rows, cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    inside = (r[:, None] < rows) & (c[None, :] < cols)
    tile = tl.load(inp_ptr + r[:, None] * cols + c[None, :], mask=inside, other=0.0)
    # Output rows of this tile start at the tile's first input column and vice versa.
    orow = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_R)
    ocol = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_C)
    keep = (orow[:, None] < cols) & (ocol[None, :] < rows)
    tl.store(out_ptr + orow[:, None] * rows + ocol[None, :], tile, mask=keep)
