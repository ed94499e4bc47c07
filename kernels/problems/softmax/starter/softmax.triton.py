# Row-wise softmax: out[r, c] = exp(x[r, c] - m) / sum_j exp(x[r, j] - m), where m is
# the maximum of row r. One program per row; the row is walked BLOCK values at a time
# because it may be longer than BLOCK.
#
# Online softmax: every lane keeps a running pair over the values it has seen (m, the
# largest, and s, the sum of exp(x - m)), so one walk over the row gives both numbers;
# the lanes' pairs are merged at the end, and a second walk writes the outputs.
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
        # ---- TODO 1 --------------------------------------------------------------
        # Fold v into (m, s), lane by lane:
        #   m_new = tl.maximum(m, v)
        #   s     = s * exp(m - m_new) + exp(v - m_new)
        #   m     = m_new
        # A lane that has seen nothing yet has m_new = -inf, and exp(-inf - -inf) is
        # NaN: use tl.where to put 0.0 in its place.
        # ---- end of TODO 1 -------------------------------------------------------

    # ---- TODO 2 ------------------------------------------------------------------
    # Merge the lanes: row_max = tl.max(m, axis=0); each lane's s was summed against
    # its own m, so total = sum of s * exp(m - row_max) (again 0.0 where m is -inf).
    # Then walk the row a second time and store tl.exp(v - row_max) / total.
    # ---- end of TODO 2 -----------------------------------------------------------
