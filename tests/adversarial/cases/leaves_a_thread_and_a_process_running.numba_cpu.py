# case: an honest kernel that leaves a thread re-patching NumPy every 10 ms and a process that ignores SIGTERM, to act during the next job
# class: state for the next job
# expect: done
# evidence: next-job wrong
# evidence: no-process kplay-planted-sleeper
#
# Restoring patched modules after a job would not be enough: the thread patches them
# again while the next job runs. And a process started in a new session, ignoring
# SIGTERM and SIGHUP, survives its parent's exit. The box that ran this code is ended
# with everything it started (its whole pid namespace) before the next job begins.
import signal
import subprocess
import threading
import time

import numba
import numpy as np


def repatch():
    while True:
        np.count_nonzero = lambda *a, **k: 0
        time.sleep(0.01)


threading.Thread(target=repatch, name="kplay-planted-thread", daemon=True).start()
subprocess.Popen(
    ["kplay-planted-sleeper", "3600"],
    executable="/bin/sleep",
    start_new_session=True,
    preexec_fn=lambda: [signal.signal(s, signal.SIG_IGN) for s in (signal.SIGTERM, signal.SIGHUP)],
)


@numba.njit
def vector_add(a, b, out, n):
    for i in range(n):
        out[i] = a[i] + b[i]
