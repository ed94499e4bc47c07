"""The parent's end of an evaluation child's private channel: framed JSON, never blocking.

A frame is what `multiprocessing.connection.Connection.send_bytes` writes, which is how
the child sends: a 4-byte big-endian length, then that many bytes of UTF-8 JSON holding
one object. The parent reads into a buffer of its own and only ever hands out whole
frames, so code in the child that writes a length and never the bytes it announced
cannot make the parent wait: the parent keeps watching its deadlines meanwhile.

What the parent cannot read as a message is `BadMessage`; the child's end closing is
`ChannelClosed`. The protocol on top (which messages, when, carrying what) is in
`workers/childproc.py` and `workers/child.py`.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import time
from typing import Any

_HEADER = struct.Struct("!i")
# Read at most this much per call, so a child that floods the channel cannot keep the
# parent in here past its deadlines.
_READ_CHUNK = 1 << 20
_READS_PER_FILL = 4


class ChannelClosed(Exception):
    """The child's end is closed: it exited, or closed the socket."""


class BadMessage(ValueError):
    """Bytes on the channel that are not a message of the protocol."""


class Channel:
    def __init__(self, sock: socket.socket, max_message_bytes: int) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._max = max_message_bytes
        self._buf = bytearray()
        self._eof = False
        self._poller = select.poll()  # not select.select: fds above 1023 are common
        self._poller.register(sock.fileno(), select.POLLIN)

    # ------------------------------------------------------------ reading

    def poll(self, timeout_s: float) -> bool:
        """Whether recv() has something to say now: a whole frame, a bad one, or the end.

        Waits up to `timeout_s` for bytes when none of that is buffered yet.
        """
        if self._ready():
            return True
        self._fill(timeout_s)
        return self._ready()

    def recv(self) -> dict[str, Any]:
        """The next message; raises BadMessage, ChannelClosed, or TimeoutError if none waits."""
        size = self._frame_size()
        if size is not None and len(self._buf) >= _HEADER.size + size:
            body = bytes(self._buf[_HEADER.size : _HEADER.size + size])
            del self._buf[: _HEADER.size + size]
            return _decode(body)
        if self._eof:
            raise ChannelClosed("the child closed its end of the channel")
        raise TimeoutError("no whole message is waiting")

    def pending(self) -> bool:
        """Whether any byte has arrived that nobody read yet (the end of the channel is not one)."""
        self._fill(0)
        return bool(self._buf)

    def _ready(self) -> bool:
        size = self._frame_size()  # raises BadMessage for an impossible length
        if size is not None and len(self._buf) >= _HEADER.size + size:
            return True
        return self._eof

    def _frame_size(self) -> int | None:
        if len(self._buf) < _HEADER.size:
            return None
        (size,) = _HEADER.unpack_from(self._buf)
        if size < 0 or size > self._max:
            raise BadMessage(f"a frame of {size} bytes (at most {self._max} are allowed)")
        return size

    def _fill(self, timeout_s: float) -> None:
        if self._eof:
            return
        if not self._poller.poll(max(0, int(timeout_s * 1000))):
            return
        for _ in range(_READS_PER_FILL):
            try:
                chunk = self._sock.recv(_READ_CHUNK)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._eof = True  # reset by the peer: as good as closed
                return
            if not chunk:
                self._eof = True
                return
            self._buf += chunk
            if len(chunk) < _READ_CHUNK:
                return

    # ------------------------------------------------------------ writing

    def send(self, message: dict[str, Any], timeout_s: float = 10.0) -> None:
        """Write one message; raises OSError (TimeoutError when the child does not read)."""
        data = json.dumps(message).encode()
        view = memoryview(_HEADER.pack(len(data)) + data)
        deadline = time.monotonic() + timeout_s
        while view:
            try:
                sent = self._sock.send(view)
            except (BlockingIOError, InterruptedError):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("the child does not read its channel") from None
                writable = select.poll()
                writable.register(self._sock.fileno(), select.POLLOUT)
                writable.poll(int(left * 1000) + 1)
                continue
            view = view[sent:]

    def close(self) -> None:
        self._sock.close()


def _decode(body: bytes) -> dict[str, Any]:
    try:
        message = json.loads(body)
    except ValueError as exc:  # UnicodeDecodeError is one
        raise BadMessage(f"not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise BadMessage(f"a JSON {type(message).__name__}, not an object")
    return message
