# Wrong: the load is masked with other=0 but the atomic add is not, so every lane past the
# end of the data of the last program counts one byte 0.
import triton
import triton.language as tl


@triton.jit
def byte_histogram(data_ptr, counts_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    values = tl.load(data_ptr + offsets, mask=mask, other=0).to(tl.int32)
    ones = tl.full((BLOCK,), 1, dtype=tl.uint32)
    tl.atomic_add(counts_ptr + values, ones)
