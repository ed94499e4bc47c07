# One row per program_id(1); each program covers BLOCK columns of it. The bias is loaded
# for those columns once and added before GELU, in its exact (erf) form.
import triton
import triton.language as tl


@triton.jit
def bias_gelu(x_ptr, bias_ptr, out_ptr, rows, cols, BLOCK: tl.constexpr):
    row = tl.program_id(1).to(tl.int64)
    c = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = c < cols
    x = tl.load(x_ptr + row * cols + c, mask=mask, other=0.0, eviction_policy="evict_first")
    b = tl.load(bias_ptr + c, mask=mask, other=0.0)
    v = x + b
    y = 0.5 * v * (1.0 + tl.math.erf(v * 0.7071067811865476))
    tl.store(out_ptr + row * cols + c, y, mask=mask)
