# WRONG: the lanes past the end of the row are loaded as 0.0, which is harmless in the
# sum, but (x - mean) is not zeroed on them before squaring: each adds mean^2 to the
# variance. Right when cols is a power of two (every lane is inside the row) or the
# mean is 0; a row of 33 values in a BLOCK of 64 near mean 1000 is far off.
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
        d = x - mean  # (missing: zero on the lanes past the row)
        rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / cols + eps)
        g = tl.load(gamma_ptr + offs, mask=mask, other=0.0)
        b = tl.load(beta_ptr + offs, mask=mask, other=0.0)
        tl.store(out_row + offs, d * rstd * g + b, mask=mask)
    else:
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for c0 in range(0, cols, BLOCK):
            c = c0 + offs
            acc += tl.load(x_row + c, mask=c < cols, other=0.0)
        mean = tl.sum(acc, axis=0) / cols
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for c0 in range(0, cols, BLOCK):
            c = c0 + offs
            x = tl.load(x_row + c, mask=c < cols, other=0.0)
            d = tl.where(c < cols, x - mean, 0.0)
            acc += d * d
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + eps)
        for c0 in range(0, cols, BLOCK):
            c = c0 + offs
            mask = c < cols
            x = tl.load(x_row + c, mask=mask, other=0.0, eviction_policy="evict_first")
            g = tl.load(gamma_ptr + c, mask=mask, other=0.0)
            b = tl.load(beta_ptr + c, mask=mask, other=0.0)
            tl.store(out_row + c, (x - mean) * rstd * g + b, mask=mask)
