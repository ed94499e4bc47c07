# WRONG: the variance as E[x^2] - mean^2, both in float32, in one walk over the row.
# Right in exact arithmetic, and it passes ordinary rows; but on a row near 1000 with a
# spread of 1, E[x^2] is about 1e6, where float32 values are 0.06 apart, so the
# difference keeps little of the variance (about 1) and can even come out negative
# (NaN after the square root). Rows 0 and 3 of every case are such rows.
import triton
import triton.language as tl


@triton.jit
def layernorm(x_ptr, gamma_ptr, beta_ptr, out_ptr, eps, rows, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    out_row = out_ptr + row * cols
    offs = tl.arange(0, BLOCK)

    if cols <= BLOCK:
        mask = offs < cols
        x = tl.load(x_row + offs, mask=mask, other=0.0, eviction_policy="evict_first")
        mean = tl.sum(x, axis=0) / cols
        var = tl.sum(x * x, axis=0) / cols - mean * mean  # E[x^2] - mean^2, in float32
        rstd = 1.0 / tl.sqrt(var + eps)
        d = x - mean
        g = tl.load(gamma_ptr + offs, mask=mask, other=0.0)
        b = tl.load(beta_ptr + offs, mask=mask, other=0.0)
        tl.store(out_row + offs, d * rstd * g + b, mask=mask)
    else:
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        acc2 = tl.zeros((BLOCK,), dtype=tl.float32)
        for c0 in range(0, cols, BLOCK):
            c = c0 + offs
            x = tl.load(x_row + c, mask=c < cols, other=0.0)
            acc += x
            acc2 += x * x
        mean = tl.sum(acc, axis=0) / cols
        var = tl.sum(acc2, axis=0) / cols - mean * mean
        rstd = 1.0 / tl.sqrt(var + eps)
        for c0 in range(0, cols, BLOCK):
            c = c0 + offs
            mask = c < cols
            x = tl.load(x_row + c, mask=mask, other=0.0, eviction_policy="evict_first")
            g = tl.load(gamma_ptr + c, mask=mask, other=0.0)
            b = tl.load(beta_ptr + c, mask=mask, other=0.0)
            tl.store(out_row + c, (x - mean) * rstd * g + b, mask=mask)
