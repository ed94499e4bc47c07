# case: write files into the project's checkout, /usr, /etc, the home folder, /var/tmp and the host's /tmp
# class: files
# expect: done
# expect-simulated: done
# evidence: absent $REPO/kplay-planted-by-a-kernel
# evidence: absent ~/kplay-planted-by-a-kernel
# evidence: absent /tmp/kplay-planted-by-a-kernel
# evidence: absent /var/tmp/kplay-planted-by-a-kernel
# evidence: output-has wrote /tmp/kplay-planted-by-a-kernel
#
# The box sees the host read-only, and not the home folder at all; what it may write is
# its own /tmp (a tmpfs no one else sees, gone with the box) and /dev/shm. The write to
# /tmp succeeds, inside; none of the files appears on the host.
import os

import triton
import triton.language as tl

import kplay

repo = os.path.dirname(os.path.dirname(os.path.abspath(kplay.__file__)))
targets = [os.path.join(repo, "kplay-planted-by-a-kernel"), "/usr/kplay-planted-by-a-kernel",
           "/etc/kplay-planted-by-a-kernel", "/kplay-planted-by-a-kernel",
           os.path.expanduser("~/kplay-planted-by-a-kernel"), "/var/tmp/kplay-planted-by-a-kernel",
           "/tmp/kplay-planted-by-a-kernel"]
for target in targets:
    try:
        with open(target, "w") as f:
            f.write("written from a kernel cell\n")
        print("wrote", target)
    except OSError as exc:
        print("could not write", target, exc)


@triton.jit
def vector_add(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a + b, mask=mask)
