# case: reach an external address: resolve a name, query a public DNS server over UDP, open TCP connections to the internet
# class: network
# expect: done
# expect-simulated: done
# evidence: output-has net: 1.1.1.1:443 .*unreachable
# evidence: output-lacks connected
#
# The box's network namespace has no route anywhere: every external address is
# unreachable, names do not resolve (and there is no /etc/resolv.conf in its view).
import socket

from numba import cuda

try:
    print("net: example.com is", socket.getaddrinfo("example.com", 443))
except OSError as exc:
    print("net: example.com", exc)
for address in (("1.1.1.1", 443), ("8.8.8.8", 53), ("2606:4700:4700::1111", 443)):
    try:
        with socket.create_connection(address, timeout=2.0):
            print(f"net: {address[0]}:{address[1]} connected")
    except OSError as exc:
        print(f"net: {address[0]}:{address[1]} {exc}")
try:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.settimeout(2.0)
        udp.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01", ("8.8.8.8", 53))
        print("net: dns answered", udp.recv(512))
except OSError as exc:
    print("net: udp", exc)


@cuda.jit
def vector_add(a, b, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = a[i] + b[i]
