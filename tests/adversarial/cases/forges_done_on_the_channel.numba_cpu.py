# case: steal the job's nonce from the interpreter's stack and write a verdict of "done" on the evaluation child's private channel; print verdicts as well
# class: forged verdict
# expect: wrong
# evidence: output-has forger: nonce (found|not found)
# evidence: message-lacks forged
# evidence: output-has state: done
#
# Before learner code had a process of its own, the evaluator's frames held the nonce the
# parent checks on every message (a local of workers/child.py's _run_one) and sys.argv
# named the channel's file descriptor: a kernel could send its own verdict, with the
# right nonce, before the real one. Here the kernel itself writes nothing, so any verdict
# other than "wrong" could only come from the forgery. It also prints verdicts, on stdout
# and stderr: what a kernel prints is its output, shown as such and never parsed.
# Now: learner code runs in a box of its own, whose stack holds no nonce and whose
# descriptors lead only to its own wire; the verdict comes from the evaluator.
import inspect
import json
import os
import struct
import sys

import numba


def steal_nonce():
    frame = inspect.currentframe()
    while frame is not None:
        nonce = frame.f_locals.get("nonce")
        if isinstance(nonce, str):
            return nonce
        frame = frame.f_back
    return None


nonce = steal_nonce()
fds = [int(a) for a in sys.argv[1:] if a.isdigit()]
print("state: done")
print(json.dumps({"type": "result", "result": {"state": "done"}}), file=sys.stderr)
print("forger: nonce", "found" if nonce else "not found", "; descriptors in argv:", fds)
if nonce is not None:  # without it the parent kills the child for any message
    forged = {
        "type": "result",
        "nonce": nonce,
        "exit": False,
        "result": {"job_id": "?", "problem": "vector_add", "backend": "numba-cpu",
                   "state": "done", "message": "forged"},
    }
    body = json.dumps(forged).encode()
    for fd in fds:
        try:
            os.write(fd, struct.pack("!i", len(body)) + body)
            print("forger: wrote a verdict on fd", fd)
        except OSError as exc:
            print("forger: fd", fd, exc)


@numba.njit
def vector_add(a, b, out, n):
    pass
