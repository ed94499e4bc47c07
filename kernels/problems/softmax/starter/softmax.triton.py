# Row-wise softmax: out[r, c] = exp(x[r, c] - m) / sum_j exp(x[r, j] - m), where m
# is the maximum of row r. One program per row; the row is walked BLOCK values at a
# time because it may be longer than BLOCK.
import triton
import triton.language as tl


@triton.jit
def softmax(x_ptr, out_ptr, rows, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    out_row = out_ptr + row * cols
    offs = tl.arange(0, BLOCK)
    # TODO: find the row maximum (load masked lanes as -inf), then the sum of
    #       tl.exp(x - max), then store tl.exp(x - max) / sum. Each step is a loop
    #       `for c0 in range(0, cols, BLOCK)` over masked loads of x_row + c0 + offs.
