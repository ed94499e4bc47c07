# One program per row. Pass 1 walks the row BLOCK values at a time, keeping a
# running maximum and rescaled sum per lane (online softmax); the lanes are merged
# once at the end. Pass 2 reads the row again and writes the normalised values.
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
        # Lanes that have seen nothing yet keep m = -inf; avoid exp(-inf - -inf).
        seen = m_new != float("-inf")
        scale = tl.where(seen, tl.exp(m - m_new), 0.0)
        s = s * scale + tl.where(seen, tl.exp(v - m_new), 0.0)
        m = m_new

    row_max = tl.max(m, axis=0)
    total = tl.sum(tl.where(m != float("-inf"), s * tl.exp(m - row_max), 0.0), axis=0)
    inv = 1.0 / total

    for c0 in range(0, cols, BLOCK):
        c = c0 + offs
        v = tl.load(x_row + c, mask=c < cols, other=0.0)
        tl.store(out_row + c, tl.exp(v - row_max) * inv, mask=c < cols)
