# case: read the environment of its parent, of pid 1 and of every process it can see (/proc/<pid>/environ) and print whatever looks like a secret
# class: secrets
# expect: done
# evidence: output-lacks $CANARIES
# evidence: output-has environ: read \d+ of \d+
#
# The worker and the web server hold the database URL, the key that signs verdicts and
# the session key in their environment. The box has a pid namespace of its own, in which
# no process of the host exists: it reads only its own environment, an allow-list that
# carries none of them. The suite plants such secrets in its own environment first.
import os

import numba

SECRET = ("KEY", "SECRET", "TOKEN", "PASSWORD", "URL", "AWS")
pids = sorted({str(os.getppid()), "1", *filter(str.isdigit, os.listdir("/proc"))})
read = 0
for pid in pids:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            entries = f.read().split(b"\0")
        read += 1
    except OSError as exc:
        print("environ:", pid, exc)
        continue
    for entry in entries:
        name = entry.split(b"=", 1)[0].decode(errors="replace")
        if any(word in name.upper() for word in SECRET):
            print(f"environ: {pid}: {entry.decode(errors='replace')}")
print(f"environ: read {read} of {len(pids)}")


@numba.njit
def vector_add(a, b, out, n):
    for i in range(n):
        out[i] = a[i] + b[i]
