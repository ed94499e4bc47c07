# case: read the host's /etc/passwd, /etc/shadow and /etc/hosts, directly and through /proc/<pid>/root of every process it can see
# class: files
# expect: done
# evidence: output-lacks root:x:0:0
# evidence: output-has passwd: learner:x:1000
#
# /etc in the sandbox holds a handful of files the dynamic loader and Python need, plus
# a passwd and a group that name one user, learner (uid 1000); the host's own files are
# not there. /proc/<pid>/root leads to another process's view of the files, but in the
# box's own pid namespace every process sees the same sandboxed tree.
import os

import numba

paths = ["/etc/passwd", "/etc/shadow", "/etc/hosts", "/etc/hostname", "/etc/group"]
paths += [f"/proc/{pid}/root/etc/passwd" for pid in filter(str.isdigit, os.listdir("/proc"))]
for path in paths:
    try:
        with open(path) as f:
            for line in f.read().splitlines()[:20]:
                print(f"{path.rsplit('/', 1)[1]}: {line}")
    except OSError as exc:
        print(path, exc)


@numba.njit
def vector_add(a, b, out, n):
    for i in range(n):
        out[i] = a[i] + b[i]
