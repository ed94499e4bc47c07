# WRONG: each program stores its partial sum into out[0] instead of adding it with
# tl.atomic_add, so the programs overwrite one another and one tile's sum survives.
# Right only when the whole vector fits in one program (n <= BLOCK).
import triton
import triton.language as tl


@triton.jit
def reduce_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    tl.store(out_ptr, tl.sum(x, axis=0))
