# WRONG: masked lanes of the last, partial block are loaded as 0.0 instead of -inf,
# so the "maximum" of a row whose values are all negative becomes 0. For rows far
# below zero every exp(x - 0) then underflows and the sum is 0 (0 / 0 = NaN).
# Right only when cols is a multiple of BLOCK or the row maximum is >= 0.
import triton
import triton.language as tl


@triton.jit
def softmax(x_ptr, out_ptr, rows, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    out_row = out_ptr + row * cols
    offs = tl.arange(0, BLOCK)

    m = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
    for c0 in range(0, cols, BLOCK):
        c = c0 + offs
        m = tl.maximum(m, tl.load(x_row + c, mask=c < cols, other=0.0))
    row_max = tl.max(m, axis=0)

    s = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, cols, BLOCK):
        c = c0 + offs
        v = tl.load(x_row + c, mask=c < cols, other=float("-inf"))
        s += tl.exp(v - row_max)
    inv = 1.0 / tl.sum(s, axis=0)

    for c0 in range(0, cols, BLOCK):
        c = c0 + offs
        v = tl.load(x_row + c, mask=c < cols, other=0.0)
        tl.store(out_row + c, tl.exp(v - row_max) * inv, mask=c < cols)
