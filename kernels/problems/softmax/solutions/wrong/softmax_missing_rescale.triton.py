# WRONG: online softmax without the rescale. When a larger value raises a lane's running
# maximum, the sum gathered so far is still measured against the old maximum: it must be
# multiplied by exp(old_max - new_max) before the new term is added, and here it is not.
# The old terms are then too large by exp(new_max - old_max), so the row sum is too big
# and every probability too small. A lane that sees one value per row (cols <= BLOCK)
# never rescales, so rows up to BLOCK long still pass; the 2x2500 case, whose lanes see
# three values each, fails.
import triton
import triton.language as tl


@triton.jit
def softmax(x_ptr, out_ptr, rows, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    out_row = out_ptr + row * cols
    offs = tl.arange(0, BLOCK)

    m = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
    s = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, cols, BLOCK):
        c = c0 + offs
        v = tl.load(x_row + c, mask=c < cols, other=float("-inf"))
        m_new = tl.maximum(m, v)
        seen = m_new != float("-inf")
        # (missing: s = s * exp(m - m_new))
        s = s + tl.where(seen, tl.exp(v - m_new), 0.0)
        m = m_new

    row_max = tl.max(m, axis=0)
    total = tl.sum(tl.where(m != float("-inf"), s * tl.exp(m - row_max), 0.0), axis=0)
    inv = 1.0 / total

    for c0 in range(0, cols, BLOCK):
        c = c0 + offs
        v = tl.load(x_row + c, mask=c < cols, other=0.0)
        tl.store(out_row + c, tl.exp(v - row_max) * inv, mask=c < cols)
