# WRONG: the bias is added after the activation, gelu(x) + bias, instead of before it,
# gelu(x + bias). The two agree only where GELU is the identity (large x) or bias is 0;
# wherever x + bias is near or below zero they part by up to |bias|.
import triton
import triton.language as tl


@triton.jit
def bias_gelu(x_ptr, bias_ptr, out_ptr, rows, cols, BLOCK: tl.constexpr):
    row = tl.program_id(1).to(tl.int64)
    c = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = c < cols
    x = tl.load(x_ptr + row * cols + c, mask=mask, other=0.0, eviction_policy="evict_first")
    b = tl.load(bias_ptr + c, mask=mask, other=0.0)
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476)) + b  # gelu(x) + b
    tl.store(out_ptr + row * cols + c, y, mask=mask)
