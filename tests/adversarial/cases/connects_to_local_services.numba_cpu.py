# case: connect to the host's Redis (127.0.0.1:6379) and PostgreSQL (127.0.0.1:5432 and its Unix socket), plant a key and queue a forged verdict
# class: network
# expect: done
# evidence: output-has redis: 127.0.0.1 .*(refused|unreachable)
# evidence: output-has postgres: 127.0.0.1 .*(refused|unreachable)
# evidence: output-lacks connected
# evidence: redis-lacks kplay-planted-by-a-kernel
#
# In the distributed mode Redis carries jobs and verdicts, and PostgreSQL keeps the runs.
# The box has a network namespace of its own, with a loopback interface on which nothing
# listens: 127.0.0.1 is not the host's. Nor does its view of the files hold /run or
# /var/run, where the database's Unix socket lives. (Verdicts on Redis are signed with a
# key no child holds, besides.)
import socket

import numba

for name, port, send in (
    ("redis", 6379, b"SET kplay-planted-by-a-kernel 1\r\nXADD kplay:results * state done\r\n"),
    ("postgres", 5432, b""),
):
    for host in ("127.0.0.1", "::1"):
        try:
            with socket.create_connection((host, port), timeout=2.0) as conn:
                conn.sendall(send)
                print(f"{name}: {host} connected")
        except OSError as exc:
            print(f"{name}: {host} {exc}")
for path in ("/var/run/postgresql/.s.PGSQL.5432", "/run/postgresql/.s.PGSQL.5432",
             "/tmp/.s.PGSQL.5432", "/var/run/redis/redis-server.sock"):
    try:
        with socket.socket(socket.AF_UNIX) as unix:
            unix.connect(path)
            print(f"unix: {path} connected")
    except OSError as exc:
        print(f"unix: {path} {exc}")


@numba.njit
def vector_add(a, b, out, n):
    for i in range(n):
        out[i] = a[i] + b[i]
