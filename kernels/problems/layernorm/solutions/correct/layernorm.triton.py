# One program per row. BLOCK is the row length rounded up to a power of two, capped at
# 4096 (the launch in problem.toml): a row that fits is loaded once, and its mean, its
# variance (of the differences from the mean, never E[x^2] - mean^2) and its outputs all
# come from that one load. Longer rows are walked BLOCK values at a time, three times.
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
        d = tl.where(mask, x - mean, 0.0)  # lanes past the row must not count
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
