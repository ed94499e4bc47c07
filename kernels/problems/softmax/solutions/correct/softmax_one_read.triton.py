# kplay: BLOCK=min(max(next_pow2(cols),16),4096) num_warps=8
# One program per row. BLOCK is the row length rounded up to a power of two, capped at
# 4096: a row that fits is loaded once into registers, and its maximum, sum and outputs
# all come from that one load (8 bytes of traffic an element, the floor). Longer rows
# take the online path: a running maximum and rescaled sum per lane over BLOCK-wide
# slices, merged across lanes at the end, then a second read for the outputs.
import triton
import triton.language as tl


@triton.jit
def softmax(x_ptr, out_ptr, rows, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    out_row = out_ptr + row * cols
    offs = tl.arange(0, BLOCK)

    if cols <= BLOCK:
        mask = offs < cols
        v = tl.load(x_row + offs, mask=mask, other=float("-inf"), eviction_policy="evict_first")
        e = tl.exp(v - tl.max(v, axis=0))  # masked lanes: exp(-inf) = 0
        tl.store(out_row + offs, e * (1.0 / tl.sum(e, axis=0)), mask=mask)
    else:
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
            v = tl.load(x_row + c, mask=c < cols, other=0.0, eviction_policy="evict_first")
            tl.store(out_row + c, tl.exp(v - row_max) * inv, mask=c < cols)
