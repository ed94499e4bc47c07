# case: print every variable of its own environment, the result key and the session key and any database or broker URL among them
# class: secrets
# expect: done
# expect-simulated: done
# evidence: output-lacks $CANARIES
# evidence: output-has env: \d+ variables
#
# The environment of an evaluation child, and of the learner's box, is an allow-list
# (PATH, locale, CUDA and library settings, the engine's own settings): the key that
# signs verdicts, the session key, the database URL and the broker's never reach it.
import os

import triton
import triton.language as tl

for name, value in sorted(os.environ.items()):
    print(f"env: {name}={value}")
print(f"env: {len(os.environ)} variables")
for name in ("KPLAY_RESULT_KEY", "KPLAY_SECRET_KEY", "KPLAY_DATABASE_URL", "KPLAY_BROKER_URL"):
    print(f"env: {name} is {os.environ.get(name, 'not set')}")


@triton.jit
def vector_add(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a + b, mask=mask)
