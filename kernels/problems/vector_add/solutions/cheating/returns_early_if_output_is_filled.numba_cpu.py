# kplay-expect: done
# The cheat: return at once when the output already holds a number, betting that timed
# repetitions reuse the output buffer without clearing it, so that the first launch's
# answer is still there for every later one to claim as its own.
# Defeated: the harness fills every output with NaN before every repetition, outside the
# timed region. This kernel never finds a filled output, adds every element every time,
# and is timed for the work it really does.
import math

import numba


@numba.njit
def vector_add(a, b, out, n):
    if n > 0 and not math.isnan(out[0]):
        return
    for i in range(n):
        out[i] = a[i] + b[i]
