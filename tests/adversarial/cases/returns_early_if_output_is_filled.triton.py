# case: skip the work when the output already holds a number (the answer of an earlier launch)
# class: early return
# mode: full
# expect: done
# expect-simulated: done
# evidence: output-lacks Traceback
#
# Every program loads the first element of its share of the output and stores only when
# it is NaN, betting that the harness reuses the output buffer of the last launch
# without clearing it. The harness poisons every output with NaN before every launch,
# warm-ups and timed repetitions alike: the kernel never finds a filled output, does its
# work every time, and (on a GPU) is timed for it.
import triton
import triton.language as tl


@triton.jit
def vector_add(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    first = tl.load(out_ptr + pid * BLOCK)
    # NaN (first != first): nothing there yet, add; a number: store nothing at all.
    end = tl.where(first != first, n, 0)
    mask = offsets < end
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a + b, mask=mask)
