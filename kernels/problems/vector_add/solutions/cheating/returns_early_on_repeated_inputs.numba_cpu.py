# kplay-expect: wrong
# The cheat: remember a fingerprint of the last launch's inputs (the size and three
# sampled values) and return at once when the next launch brings the same fingerprint,
# trusting the output buffer to still hold the last answer. Repetitions of one launch on
# unchanged inputs and an untouched output would make every launch after the first free.
# Caught twice over: every output is filled with NaN before every repetition, so a
# skipped launch leaves NaN behind; and consecutive repetitions get input sets that
# differ in scattered elements, which three sampled values do not see.
import builtins

import numba

_last_fingerprint = [None]


def _seen_last_time(fingerprint):
    same = _last_fingerprint[0] == fingerprint
    _last_fingerprint[0] = fingerprint
    return same


# Numba's object mode looks globals up in the module as sys.modules holds it, which the
# evaluator does not keep there; it looks in builtins next, so the helper goes there.
builtins.vector_add_seen_last_time = _seen_last_time


@numba.njit
def vector_add(a, b, out, n):
    # Numba cannot keep state between calls; objmode runs this block as plain Python.
    with numba.objmode(same="boolean"):
        same = vector_add_seen_last_time((n, float(a[0]), float(b[n // 2]), float(a[n - 1])))
    if same:
        return
    for i in range(n):
        out[i] = a[i] + b[i]
