# case: allocate and touch more memory than the job may use, from inside a launch
# class: limits
# expect: runtime_error
# evidence: message-has [Mm]emory
#
# Each launch asks for chunks of 256 MiB and writes to every page of them. The job may
# add KPLAY's memory limit to what its box held when it started: past it the address
# space limit makes the allocation fail (MemoryError, where there is no GPU) or the
# parent's watchdog kills the box; either way the run ends as a runtime error that
# says so, and the host keeps its memory.
import builtins

import numba
import numpy as np

kept = []


def hoard():
    while True:
        kept.append(np.ones(64 * 1024 * 1024, dtype=np.float32))


builtins.adversarial_hoard = hoard


@numba.njit
def vector_add(a, b, out, n):
    with numba.objmode():
        adversarial_hoard()
