# case: keep each answer keyed on where the arrays live (their addresses) and the size, and copy it back when the key comes again
# class: cache
# mode: full
# expect: wrong
# evidence: message-has repetition|re-check
#
# Timed repetitions on the same buffers would cost one copy each. The harness rotates
# input sets through its buffers, sets that differ in scattered elements: the key comes
# back for inputs whose sum differs, and the check of that repetition finds the stale
# answer.
import builtins

import numba

answers = {}


def replay(a, b, out, n):
    kept = answers.get((a.ctypes.data, b.ctypes.data, out.ctypes.data, n))
    if kept is None:
        return False
    out[:] = kept
    return True


def keep(a, b, out, n):
    answers[(a.ctypes.data, b.ctypes.data, out.ctypes.data, n)] = out.copy()


builtins.adversarial_replay = replay
builtins.adversarial_keep = keep


@numba.njit
def vector_add(a, b, out, n):
    with numba.objmode(hit="boolean"):
        hit = adversarial_replay(a, b, out, n)
    if hit:
        return
    for i in range(n):
        out[i] = a[i] + b[i]
    with numba.objmode():
        adversarial_keep(a, b, out, n)
