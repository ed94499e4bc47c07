# case: write files until the disk is full: one huge file, then many smaller ones
# class: limits
# expect: done
# expect-simulated: done
# evidence: output-has disk: .*(File too large|No space left)
# evidence: absent /tmp/kplay-planted-huge-file
#
# A single file is capped by RLIMIT_FSIZE (KPLAY's file_bytes); everything the box may
# write lives in its own /tmp, a tmpfs of KPLAY_SANDBOX_TMP_MB: the writes stop there,
# the host's disk is untouched, and the files vanish with the box.
import os

import triton
import triton.language as tl

chunk = b"\0" * (16 * 1024 * 1024)
for name in ("kplay-planted-huge-file", *(f"kplay-planted-file-{i}" for i in range(1000))):
    try:
        with open(f"/tmp/{name}", "wb") as f:
            for _ in range(4096):
                f.write(chunk)
    except OSError as exc:
        print("disk:", name, exc)
        if "No space" in str(exc):
            break
for name in os.listdir("/tmp"):
    if name.startswith("kplay-planted"):
        os.remove(f"/tmp/{name}")


@triton.jit
def vector_add(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a + b, mask=mask)
