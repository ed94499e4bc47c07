# case: make every clock of the process run a thousand times slower, so that the timed repetitions look a thousand times faster
# class: harness patching
# mode: full
# expect: done
# evidence: timed
# evidence: output-has clocks: replaced \d+
#
# time.perf_counter_ns, perf_counter, monotonic and their aliases in every loaded module
# are replaced by clocks that advance by a thousandth of the real time. Had the harness
# timed the kernel with one of them, the kernel would have been timed at a thousandth of
# its real time (and then caught as faster than the device allows: suspicious). The
# harness's clock is in the evaluator, a process this code never runs in: the kernel is
# honest, and timed for what it really does.
import sys
import time

import numba

real_ns, real_s, real_mono = time.perf_counter_ns, time.perf_counter, time.monotonic
start_ns, start_s, start_mono = real_ns(), real_s(), real_mono()
# The real clocks are bound as defaults: the loop below replaces this module's names too.
slow = {
    real_ns: lambda f=real_ns: start_ns + (f() - start_ns) // 1000,
    real_s: lambda f=real_s: start_s + (f() - start_s) / 1000,
    real_mono: lambda f=real_mono: start_mono + (f() - start_mono) / 1000,
}
replaced = 0
for module in list(sys.modules.values()):
    for name, value in list(getattr(module, "__dict__", {}).items()):
        try:
            if value in slow:
                setattr(module, name, slow[value])
                replaced += 1
        except Exception:
            pass
print("clocks: replaced", replaced)


@numba.njit
def vector_add(a, b, out, n):
    for i in range(n):
        out[i] = a[i] + b[i]
