# WRONG: the offsets forget the program id, so every program adds the first BLOCK
# elements again and everything past index BLOCK - 1 is never written. Vectors of at
# most BLOCK elements come out right.
import triton
import triton.language as tl


@triton.jit
def vector_add(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a + b, mask=mask)
