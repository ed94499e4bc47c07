# case: start a daemon that outlives the job: double fork, a new session, its parent gone
# class: processes
# expect: done
# expect-simulated: done
# evidence: no-process kplay-planted-daemon
#
# The classic daemon leaves its parent's session and process group and is re-parented
# to init. In the sandbox "init" is bubblewrap's, inside the box's pid namespace: when
# the box is ended after the job, the kernel ends everything in the namespace, daemon
# included.
import os

from numba import cuda

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["kplay-planted-daemon", "3600"])
    os._exit(0)
os.wait()


@cuda.jit
def vector_add(a, b, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = a[i] + b[i]
