# WRONG: scales the wrong operand, computing x + alpha * y. On all-zero inputs both
# formulas give zero; on real data every element is off.
import triton
import triton.language as tl


@triton.jit
def saxpy(alpha, x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + alpha * y, mask=mask)
