"""The wire between the trusted evaluator and the learner's box: framed JSON and fds.

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON holding one
object; a frame may carry file descriptors (SCM_RIGHTS), which is how the evaluator
hands the box the shared-memory segments its arrays live in. JSON only, never pickle:
neither side runs code the other sends. The evaluator reads with a deadline and a size
bound, since the box runs learner code and may write anything, or nothing.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import time
from typing import Any

_HEADER = struct.Struct("!I")
MAX_FRAME = 64 * 1024 * 1024  # a cubin with its SASS listing fits many times over
MAX_FDS = 16
OK = b'{"ok":true}'  # the answer to most requests, sent and compared as bytes


class WireError(Exception):
    """The other end closed, timed out, or sent bytes that are not a frame."""


class Wire:
    def __init__(self, sock: socket.socket, max_frame: int = MAX_FRAME) -> None:
        sock.setblocking(True)
        self.sock = sock
        self.max_frame = max_frame
        self._pending_fds: list[int] = []

    @classmethod
    def from_fd(cls, fd: int) -> Wire:
        return cls(socket.socket(fileno=fd))

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    # ------------------------------------------------------------ sending

    def send(self, message: dict[str, Any], fds: list[int] | None = None) -> None:
        self.send_frame(json.dumps(message, separators=(",", ":")).encode(), fds)

    def send_frame(self, body: bytes, fds: list[int] | None = None) -> None:
        data = _HEADER.pack(len(body)) + body
        try:
            if fds:
                sent = socket.send_fds(self.sock, [data[:4]], fds)
                if sent != 4:
                    raise WireError("short write of a frame header")
                self.sock.sendall(data[4:])
            else:
                self.sock.sendall(data)
        except OSError as exc:
            raise WireError(f"the other end is gone: {exc}") from None

    # ------------------------------------------------------------ receiving

    def recv(self, timeout_s: float | None = None) -> tuple[dict[str, Any], list[int]]:
        """One message and the fds that came with it; WireError on anything else."""
        body, fds = self.recv_frame(timeout_s)
        return self.decode(body, fds), fds

    def recv_frame(self, timeout_s: float | None = None) -> tuple[bytes, list[int]]:
        """One frame's bytes, undecoded, and the fds that came with it."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        header, fds = self._read(_HEADER.size, deadline, want_fds=True)
        (length,) = _HEADER.unpack(header)
        if length > self.max_frame:
            _close_all(fds)
            raise WireError(f"a frame of {length} bytes is over the limit of {self.max_frame}")
        body, _ = self._read(length, deadline, want_fds=False)
        return body, fds

    @staticmethod
    def decode(body: bytes, fds: list[int]) -> dict[str, Any]:
        try:
            message = json.loads(body)
        except ValueError:
            _close_all(fds)
            raise WireError("a frame that is not JSON") from None
        if not isinstance(message, dict):
            _close_all(fds)
            raise WireError("a frame that is not a JSON object")
        return message

    def _read(self, n: int, deadline: float | None, want_fds: bool) -> tuple[bytes, list[int]]:
        buf = bytearray()
        fds: list[int] = []
        while len(buf) < n:
            if deadline is not None and not self._ready(deadline):
                _close_all(fds)
                raise WireError("no answer in time")
            try:
                if want_fds and not buf:
                    chunk, got, _flags, _addr = socket.recv_fds(self.sock, n - len(buf), MAX_FDS)
                    fds.extend(got)
                else:
                    chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            except OSError as exc:
                _close_all(fds)
                raise WireError(f"the other end is gone: {exc}") from None
            if not chunk:
                _close_all(fds)
                raise WireError("the other end closed the connection")
            buf += chunk
        return bytes(buf), fds

    def _ready(self, deadline: float) -> bool:
        """Whether bytes can be read before `deadline` (at once when they are there)."""
        left = deadline - time.monotonic()
        return left > 0 and bool(select.select([self.sock], [], [], left)[0])


def _close_all(fds: list[int]) -> None:
    import os

    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
