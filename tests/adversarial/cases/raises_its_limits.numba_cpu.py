# case: raise every resource limit it can (open files, file size, CPU time, processes, address space, core dumps) above its hard limit
# class: limits
# expect: done
# evidence: output-lacks limits: raised
# evidence: output-has limits: NOFILE refused
#
# The box sets its limits, soft and hard, before any learner code arrives, and has no
# capability that would let it raise a hard limit again: every attempt fails. (Lowering
# a limit, or raising a soft one up to its hard limit, is allowed and harms only itself.)
import resource

import numba

for key in ("NOFILE", "FSIZE", "CPU", "NPROC", "AS", "CORE"):
    which = getattr(resource, f"RLIMIT_{key}")
    soft, hard = resource.getrlimit(which)
    if hard == resource.RLIM_INFINITY:
        print(f"limits: {key} unlimited")
        continue
    try:
        resource.setrlimit(which, (hard + 1024, hard + 1024))
        print(f"limits: {key} raised past {hard}")
    except (ValueError, OSError) as exc:
        print(f"limits: {key} refused ({exc})")


@numba.njit
def vector_add(a, b, out, n):
    for i in range(n):
        out[i] = a[i] + b[i]
