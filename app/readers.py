"""Anonymous readers: one random id per browser (or API client), in a signed session cookie.

A reader who has not signed in is who owns a run: the one who may read it and its source,
whose history a cell shows, and whom the per-user cap and the rate limits count. Once signed
in, the same cookie also carries the account's id (app/accounts.py decides who is asking).
The cookie carries the reader's full id (128 random bits) signed with the app's secret key
(itsdangerous), so a reader can neither forge another's id nor guess one; a cookie that does
not verify, or is older than `MAX_AGE_S`, is ignored and a new reader begins.

Pages get a reader on their first visit. A JSON API client gets one the first time it does
something that needs one (starts a run, lists a cell's runs) and the same cookie comes back
in the answer: a client that keeps and returns it reads its own runs; one that does not is a
new reader on every call and can read nothing it made.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.datastructures import MutableHeaders
from starlette.requests import HTTPConnection
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "kplay_session"
MAX_AGE_S = 400 * 24 * 3600
# A cookie older than this is signed again on the next answer, so a returning reader's
# session does not end MAX_AGE_S after the first visit.
REFRESH_AFTER_S = 7 * 24 * 3600
SALT = "kplay.reader-session"
_FIELD = "reader"
# The account signed in on this session, when one is (app/accounts.py).
_ACCOUNT = "account"
# An LTI session's: the origins of the LMS that launched it, which may frame its pages
# (app/routers/lti.py; the CSP's frame-ancestors, app/guards.py).
_FRAME = "frame"


_HEX = frozenset("0123456789abcdef")


def _is_reader_id(value: object) -> bool:
    return isinstance(value, str) and len(value) == 32 and set(value) <= _HEX


class ReaderSessions:
    """Reads, makes and signs reader sessions; one per app, holding the app's signer."""

    def __init__(self, secret: str, anonymous: str) -> None:
        self._serializer = URLSafeTimedSerializer(secret, salt=SALT)
        self.anonymous = anonymous

    # ------------------------------------------------------------ reading

    def _verified(
        self, conn: HTTPConnection
    ) -> tuple[str, float, int | None, tuple[str, ...]] | None:
        """(reader id, signing time, account, framing origins) of a valid cookie; None when
        absent, forged or expired."""
        raw = conn.cookies.get(COOKIE)
        if not raw:
            return None
        try:
            payload, signed_at = self._serializer.loads(
                raw, max_age=MAX_AGE_S, return_timestamp=True
            )
        except BadSignature:  # also a bad or expired timestamp (SignatureExpired)
            return None
        reader = payload.get(_FIELD) if isinstance(payload, dict) else None
        if not isinstance(reader, str) or not _is_reader_id(reader):
            return None
        account = payload.get(_ACCOUNT)
        if not isinstance(account, int) or isinstance(account, bool):
            account = None
        frame = payload.get(_FRAME)
        origins = tuple(o for o in frame if isinstance(o, str)) if isinstance(frame, list) else ()
        return reader, signed_at.timestamp(), account, origins

    def current(self, conn: HTTPConnection) -> str:
        """This request's reader id, made (and marked to be sent back) when it has none."""
        state = conn.state
        reader = getattr(state, "reader", None)
        if reader is not None:
            return str(reader)
        found = self._verified(conn)
        if found is None:
            reader, state.reader_send, state.account = secrets.token_hex(16), True, None
            state.frame = ()
        else:
            reader, signed_at, state.account, state.frame = found
            state.reader_send = time.time() - signed_at > REFRESH_AFTER_S
        state.reader = reader
        return reader

    def account(self, conn: HTTPConnection) -> int | None:
        """The id of the account this session is signed in to; None for an anonymous one."""
        self.current(conn)
        account = getattr(conn.state, "account", None)
        return account if isinstance(account, int) else None

    def begin(self, conn: HTTPConnection, account: int | None) -> None:
        """A new session for this browser: a fresh reader id, signed in to `account` (log-in)
        or to none (log-out). The old id is never reused, so a session id seen before
        signing in is worth nothing after."""
        self.current(conn)
        conn.state.reader = secrets.token_hex(16)
        conn.state.account = account
        conn.state.frame = ()
        conn.state.reader_send = True

    def frame(self, conn: HTTPConnection, origins: tuple[str, ...]) -> None:
        """Make the session an LTI launch just began (`begin`) an LTI session: its pages may
        be framed by `origins` (the LMS's), and over https its cookie is SameSite=None,
        Secure and Partitioned, so that it comes back from inside the LMS's frame (and, where
        the browser keeps third-party cookies apart per top-level site, only there)."""
        self.current(conn)
        conn.state.frame = tuple(origins)
        conn.state.reader_send = True

    def frame_origins(self, conn: HTTPConnection) -> tuple[str, ...]:
        """The origins that may frame this session's pages: an LTI session's LMS; else none.
        Read without making a reader, for any answer (app/guards.py)."""
        frame = getattr(conn.state, "frame", None)
        if frame is None:
            found = self._verified(conn)
            frame = found[3] if found is not None else ()
        return tuple(frame)

    def user(self, conn: HTTPConnection) -> str:
        """The owner name runs are stored under: the anonymous name and the full reader id."""
        return f"{self.anonymous}-{self.current(conn)}"

    # ------------------------------------------------------------ answering

    def set_cookie_header(self, conn: HTTPConnection) -> str | None:
        """The Set-Cookie value to add to the answer, when the reader is new or due a refresh."""
        state = conn.state
        if not getattr(state, "reader_send", False):
            return None
        frame = tuple(getattr(state, "frame", ()) or ())
        secure = conn.url.scheme == "https"
        # SameSite=None needs Secure: over plain http (a laptop) an LTI session stays Lax.
        framed = bool(frame) and secure
        return cookie_header(
            COOKIE,
            self._serializer.dumps(
                self._payload(state.reader, getattr(state, "account", None), frame)
            ),
            partitioned=framed,
            max_age=MAX_AGE_S,
            httponly=True,
            samesite="none" if framed else "lax",
            secure=secure,
        )

    @staticmethod
    def _payload(
        reader: str, account: int | None, frame: tuple[str, ...] = ()
    ) -> dict[str, object]:
        payload: dict[str, object] = {_FIELD: reader}
        if account is not None:
            payload[_ACCOUNT] = account
        if frame:
            payload[_FRAME] = list(frame)
        return payload


def cookie_header(key: str, value: str, *, partitioned: bool = False, **options: Any) -> str:
    """A Set-Cookie value as Response.set_cookie writes it, with the Partitioned attribute
    (cookies kept per top-level site, for a frame inside another site) where asked: Starlette
    writes that one only on Python 3.14 and later."""
    carrier = Response()
    carrier.set_cookie(key, value, **options)
    return carrier.headers["set-cookie"] + ("; Partitioned" if partitioned else "")


class ReaderCookieMiddleware:
    """Gives every page request a reader, and sends the cookie back when it is new or old.

    Pure ASGI: it reads the reader from the request and adds one header to the answer, and
    never touches the body. JSON API and static requests get a reader only when a handler
    asks for one (through `ReaderSessions.current`).
    """

    def __init__(self, app: ASGIApp, sessions: ReaderSessions) -> None:
        self.app = app
        self.sessions = sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        conn = HTTPConnection(scope)
        if not conn.url.path.startswith(("/api/", "/static/")):
            self.sessions.current(conn)

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                cookie = self.sessions.set_cookie_header(conn)
                if cookie is not None:
                    MutableHeaders(scope=message).append("set-cookie", cookie)
            await send(message)

        await self.app(scope, receive, send_with_cookie)
