# case: a compile bomb in Triton: a loop over a constexpr range of a million, which the compiler unrolls
# class: compile bomb
# expect: timeout | runtime_error
# evidence: within 40
#
# tl.static_range is unrolled at compile time: a million copies of the loop body for the
# compiler to build, in the learner's box. The job's wall clock ends it (or its memory
# limit), and the box goes with it. A case for a GPU: Triton's interpreter has no
# compiler, it would only take a million steps per program.
import triton
import triton.language as tl


@triton.jit
def vector_add(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    acc = tl.load(a_ptr + offsets, mask=mask)
    for i in tl.static_range(1_000_000):
        acc = acc + tl.load(b_ptr + offsets, mask=mask) * 0.0
    tl.store(out_ptr + offsets, acc + tl.load(b_ptr + offsets, mask=mask), mask=mask)
