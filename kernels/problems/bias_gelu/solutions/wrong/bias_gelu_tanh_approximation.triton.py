# WRONG: GELU by its tanh approximation, 0.5 * v * (1 + tanh(sqrt(2/pi) * (v + 0.044715
# v^3))), where the problem asks for the exact erf form (torch's default). The two agree
# to about 5e-4: invisible in a bfloat16 output, and in a plot, but far outside this
# problem's float32 tolerance near v = -2.7 and v = 2.7, where the curves part most. Passes
# only where every v is far from the knee (large positive, or near zero).
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
    # tanh approximation instead of erf: tanh(z) = 2 * sigmoid(2z) - 1
    z = 0.7978845608028654 * (v + 0.044715 * v * v * v)
    y = 0.5 * v * (1.0 + (2.0 * tl.sigmoid(2.0 * z) - 1.0))
    tl.store(out_ptr + row * cols + c, y, mask=mask)
