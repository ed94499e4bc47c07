# kplay-expect: wrong
# The cheat: keep every answer in a dictionary keyed on where the inputs live (their
# data pointers), the sizes and a few sampled input values, and copy the kept answer
# into C when a key comes back instead of multiplying again. Timed repetitions on the
# same buffers and the same inputs would then cost one copy of C each.
# Caught: between repetitions the harness rotates input sets through its buffers, and
# the sets differ from each other in about 1/32 of their elements, at random positions.
# The key comes back for inputs whose product differs, the copied answer is stale, and
# the check of that repetition's output finds it wrong.
import builtins

import numba
import numpy as np

_answers = {}


def _key(A, B, M, N, K):
    samples = (float(A[0, 0]), float(A[M // 2, K // 2]), float(B[K - 1, N - 1]))
    return (A.ctypes.data, B.ctypes.data, M, N, K) + samples


def _replay(A, B, C, M, N, K):
    kept = _answers.get(_key(A, B, M, N, K))
    if kept is None:
        return False
    C[:, :] = kept
    return True


def _keep(A, B, C, M, N, K):
    _answers[_key(A, B, M, N, K)] = C.copy()


# Numba's object mode looks globals up in the module as sys.modules holds it, which the
# evaluator does not keep there; it looks in builtins next, so the helpers go there.
builtins.sgemm_replay = _replay
builtins.sgemm_keep = _keep


@numba.njit(fastmath=True)
def sgemm(A, B, C, M, N, K):
    # Numba cannot keep state between calls; objmode runs these blocks as plain Python.
    with numba.objmode(hit="boolean"):
        hit = sgemm_replay(A, B, C, M, N, K)
    if hit:
        return
    for i in range(M):
        row = np.zeros(N, dtype=np.float32)
        for k in range(K):
            a = A[i, k]
            for j in range(N):
                row[j] += a * B[k, j]
        for j in range(N):
            C[i, j] = row[j]
    with numba.objmode():
        sgemm_keep(A, B, C, M, N, K)
