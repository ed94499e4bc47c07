# WRONG: the new value's exponent is taken against the maximum as it stood *before* that
# value was seen. The running pair is kept as
#     s = s * exp(m_old - m_new) + exp(v - m_old)      (should be exp(v - m_new))
#     m = m_new
# so whenever v raises the maximum its term counts exp(v - m_old) > 1 instead of 1.
# Every lane starts from the row's first value (not -inf, so nothing turns into NaN):
# the error is quiet, a sum too large and probabilities too small. It passes rows of one
# value and rows whose first value is their largest, and fails any longer random row.
import triton
import triton.language as tl


@triton.jit
def softmax(x_ptr, out_ptr, rows, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    out_row = out_ptr + row * cols
    offs = tl.arange(0, BLOCK)

    # Start every lane at the row's first value: a finite maximum from the outset.
    m = tl.zeros((BLOCK,), dtype=tl.float32) + tl.load(x_row)
    s = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, cols, BLOCK):
        c = c0 + offs
        v = tl.load(x_row + c, mask=c < cols, other=float("-inf"))
        m_new = tl.maximum(m, v)
        s = s * tl.exp(m - m_new) + tl.exp(v - m)  # stale: m is the maximum before v
        m = m_new

    row_max = tl.max(m, axis=0)
    total = tl.sum(s * tl.exp(m - row_max), axis=0)
    inv = 1.0 / total

    for c0 in range(0, cols, BLOCK):
        c = c0 + offs
        v = tl.load(x_row + c, mask=c < cols, other=0.0)
        tl.store(out_row + c, tl.exp(v - row_max) * inv, mask=c < cols)
