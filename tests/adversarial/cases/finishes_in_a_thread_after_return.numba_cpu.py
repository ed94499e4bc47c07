# case: return at once and leave the work to a thread that writes the output a little later
# class: work after return
# expect: wrong
# evidence: message-has [Nn]ever written
#
# The launch starts a thread and returns; the thread adds 50 ms later. A harness that
# stopped its clock at the return and looked at the output later would time nothing
# and still find the answer. The evaluator checks the output as soon as the launch has
# returned (and on a GPU, after synchronising the device): it is still poison.
import builtins
import threading
import time

import numba


def later(a, b, out, n):
    def work():
        time.sleep(0.05)
        out[:n] = a[:n] + b[:n]

    threading.Thread(target=work, daemon=True).start()


builtins.adversarial_later = later


@numba.njit
def vector_add(a, b, out, n):
    with numba.objmode():
        adversarial_later(a, b, out, n)
