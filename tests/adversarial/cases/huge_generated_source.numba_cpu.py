# case: a compile bomb in Python: a short cell that generates a source of six million lines and compiles it
# class: compile bomb
# expect: compile_error | runtime_error
# evidence: message-has [Mm]emory
# evidence: within 20
#
# The source the server accepts is small (KPLAY_MAX_SOURCE_BYTES); what it builds at
# import time is not. Python's compiler needs gigabytes for this one: the box's address
# space limit makes the compile fail with a MemoryError (where there is no GPU; the run
# is a compile error, the source having failed to load), or the parent's memory watchdog
# ends the box (a runtime error that says the job used more than its memory).
import numba

lines = "\n".join(f"x{i} = {i} * {i} + x{i - 1}" if i else "x0 = 0" for i in range(6_000_000))
exec(compile(lines, "generated", "exec"))


@numba.njit
def vector_add(a, b, out, n):
    for i in range(n):
        out[i] = a[i] + b[i]
