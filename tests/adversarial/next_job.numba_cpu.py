# The job the suite runs right after a case that tries to leave something behind, in the
# same evaluation child. Its kernel writes nothing, so an honest harness must call it
# wrong; at import it looks for what the case before it planted (every planted thing is
# named kplay-planted...) and prints one LEFTOVER line for each thing it finds.
import builtins
import os
import threading

import numba
import numpy as np

found = []
for root in {
    "/tmp",
    "/dev/shm",
    os.path.expanduser("~"),
    os.environ.get("TMPDIR", "/tmp"),
    os.environ.get("NUMBA_CACHE_DIR", "/tmp"),
    os.environ.get("TRITON_CACHE_DIR", "/tmp"),
}:
    for here, dirs, files in os.walk(root):
        if here.count(os.sep) - root.count(os.sep) > 4:
            dirs[:] = []
        found += [f"file {here}/{n}" for n in dirs + files if n.startswith("kplay-planted")]
found += [f"builtins.{n}" for n in dir(builtins) if n.startswith("kplay_planted")]
for name in ("count_nonzero", "array_equal", "isnan", "subtract", "abs"):
    if not getattr(getattr(np, name), "__module__", "numpy").startswith("numpy"):
        found.append(f"numpy.{name} replaced")
found += [f"thread {t.name}" for t in threading.enumerate() if "kplay-planted" in t.name]
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"kplay-planted" in f.read():
                found.append(f"process {pid}")
    except OSError:
        pass
for what in found:
    print("LEFTOVER:", what)
print("next job: looked for leftovers,", len(found), "found")


@numba.njit
def vector_add(a, b, out, n):
    pass
