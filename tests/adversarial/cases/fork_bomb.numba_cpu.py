# case: a fork bomb: shells that each start two more, until no process can be started
# class: processes
# expect: done
# evidence: output-has bomb: stopped at \d+ processes
# evidence: output-has bomb: no room left
# evidence: no-process kplay-planted-bomb
# needs: process-limit
#
# Every process the box starts counts against its own limit of tasks (the cgroup's
# pids.max and RLIMIT_NPROC in its user namespace, KPLAY_SANDBOX_MAX_TASKS), not the
# host's: the bomb stops at that limit and the host can still start processes. (Where
# the worker runs as root without a delegated cgroup, nothing bounds them: the kernel
# exempts root from RLIMIT_NPROC. The suite does not run this case there.) Then the
# module kills all but a few of its sleepers, so that its own kernel can run (a box at
# its limit cannot even start a thread), and leaves those few behind: they die with the
# box after the job, with everything else in its pid namespace.
import os
import signal
import subprocess
import time

import numba

os.symlink("/bin/sleep", "/tmp/kplay-planted-bomb")
bomb = "f() { f & f & exec /tmp/kplay-planted-bomb 3600; }; f"
subprocess.Popen(["/bin/sh", "-c", bomb], start_new_session=True, stderr=subprocess.DEVNULL)


def bombs():
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"kplay-planted-bomb" in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


print("bomb: started", flush=True)
started, last = time.monotonic(), -1
while time.monotonic() - started < 10.0:
    time.sleep(0.3)
    now = len(bombs())
    if now == last and now > 0:
        break
    last = now
print("bomb: stopped at", len(bombs()), "processes", flush=True)
try:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    print("bomb: a fork still worked")
except OSError as exc:
    print("bomb: no room left:", exc, flush=True)
for pid in bombs()[8:]:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


@numba.njit
def vector_add(a, b, out, n):
    for i in range(n):
        out[i] = a[i] + b[i]
