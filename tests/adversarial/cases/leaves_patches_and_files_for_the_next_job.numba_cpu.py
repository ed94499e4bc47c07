# case: an honest kernel whose module also leaves, for whatever job comes next, a checker that always agrees, a patched NumPy, a name in builtins and files in every folder it may write
# class: state for the next job
# expect: done
# evidence: next-job wrong
# evidence: output-has planted \d+ files
#
# A warm evaluation child serves many jobs. Had learner code run in it, what this module
# replaces (the harness's comparison, NumPy's count_nonzero) would still be replaced for
# the next reader's job, whose kernel writes nothing and would pass; and the files it
# leaves in /tmp, its home, /dev/shm and the compile caches (a planted cache entry, say)
# would be there for the next job to find. Learner code runs in a box that serves one
# job and is then ended, its /tmp and /dev/shm with it: the next job is judged as it
# should be, and finds none of it.
import builtins
import os

import numba
import numpy as np

np.count_nonzero = lambda *a, **k: 0
builtins.kplay_planted_checker = True
try:
    from kplay.kernels import check

    check.compare = lambda *a, **k: {"ok": True, "mismatches": 0, "max_abs_err": 0.0}
    check.verify = lambda problem, prepared, ops, expected: None
except ImportError:
    pass
planted = 0
for folder in {"/tmp", "/dev/shm", os.path.expanduser("~"), os.environ.get("TMPDIR", "/tmp"),
               os.environ.get("NUMBA_CACHE_DIR", "/tmp"),
               os.environ.get("TRITON_CACHE_DIR", "/tmp")}:
    try:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "kplay-planted-file"), "w") as f:
            f.write("left by an earlier job\n")
        planted += 1
    except OSError as exc:
        print("could not plant in", folder, exc)
print("planted", planted, "files, numpy.count_nonzero, check.compare, builtins")


@numba.njit
def vector_add(a, b, out, n):
    for i in range(n):
        out[i] = a[i] + b[i]
