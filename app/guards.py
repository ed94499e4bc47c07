"""Guards every request passes through: the body-size limit, the security headers, and which
static files are served at all. Each is plain ASGI (or a StaticFiles rule), wired up by
`kplay.app.web.install_guards`; docs/security.md, "The web layer", says what each is for.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Awaitable, Callable
from pathlib import PurePosixPath

from fastapi.staticfiles import StaticFiles
from starlette.datastructures import Headers, MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send


# What a page may load and from where: only this server's own scripts, styles, fonts and
# images (data: images too, which the editor's stylesheet uses for its squiggly underlines).
# No inline script, no inline style attribute, no eval, no plugin, and no framing, except by
# the LMS of an LTI session (`frame_origins`: the registered platform's origins, which the
# session's signed cookie carries; app/routers/lti.py). The one <style> element allowed is
# the one the editor generates, which carries this response's nonce (base.html hands it to
# playground.js in a meta tag).
def content_security_policy(nonce: str, frame_origins: tuple[str, ...] = ()) -> str:
    ancestors = " ".join(o for o in frame_origins if is_origin(o)) or "'none'"
    return "; ".join(
        (
            "default-src 'self'",
            "script-src 'self'",
            f"style-src 'self' 'nonce-{nonce}'",
            "img-src 'self' data:",
            "font-src 'self'",
            "connect-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            f"frame-ancestors {ancestors}",
        )
    )


def is_origin(text: str) -> bool:
    """An http(s) origin fit for a CSP source: scheme, host and port only."""
    scheme, sep, rest = text.partition("://")
    allowed = set("abcdefghijklmnopqrstuvwxyz0123456789.-:[]")
    return scheme in ("https", "http") and bool(sep) and bool(rest) and set(rest) <= allowed


SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}

# The static folders a page needs, as the wheel ships them (pyproject's package data for
# kplay.static); plus the top-level images. Everything else under static/ (dev/, the
# component gallery; editor/, the sources the editor bundle is built from) is not served.
SERVED_FOLDERS = frozenset({"book", "css", "fonts", "js", "vendor"})
SERVED_TOP_LEVEL_SUFFIXES = frozenset({".svg"})

Refuse = Callable[[Request, int, str], Awaitable[Response]]


class BodyTooLarge(HTTPException):
    """A request body over the limit, found while it streamed in (no Content-Length)."""

    def __init__(self, limit: int) -> None:
        super().__init__(status_code=413, detail=too_large_message(limit))


def too_large_message(limit: int) -> str:
    return f"the request body is larger than the limit of {limit} bytes; send a smaller kernel"


class BodyLimitMiddleware:
    """Refuses a request body over `limit` bytes before anything parses it.

    A Content-Length over the limit is answered 413 at once, without reading the body. A body
    without one (chunked) is counted as it streams in: the chunk that crosses the limit
    raises BodyTooLarge inside whatever is reading it, and the app's handler for it answers.
    """

    def __init__(self, app: ASGIApp, limit: int, refuse: Refuse) -> None:
        self.app = app
        self.limit = limit
        self.refuse = refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None:
            size = int(declared) if declared.strip().isdigit() else None
            if size is None or size > self.limit:
                status = 413 if size is not None else 400
                message = (
                    too_large_message(self.limit)
                    if size is not None
                    else f"Content-Length {declared!r} is not a number of bytes"
                )
                response = await self.refuse(Request(scope), status, message)
                await response(scope, receive, send)
                return
        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, watched_send)
        except BodyTooLarge as exc:
            # Normally the app's handler answers; this is for a reader outside its reach.
            if started:
                raise
            response = await self.refuse(Request(scope), 413, str(exc.detail))
            await response(scope, receive, send)


class SecurityHeadersMiddleware:
    """Adds the Content-Security-Policy, with a fresh nonce for each request (templates read
    it as `request.state.csp_nonce`), and SECURITY_HEADERS to every answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        nonce = secrets.token_urlsafe(18)
        conn = HTTPConnection(scope)
        conn.state.csp_nonce = nonce

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                # Read when the answer starts: an LTI launch begins its session in the handler.
                framed = _frame_origins(conn)
                headers = MutableHeaders(scope=message)
                headers["Content-Security-Policy"] = content_security_policy(nonce, framed)
                for name, value in SECURITY_HEADERS.items():
                    # X-Frame-Options knows no list of origins: the CSP alone says who frames.
                    if not (framed and name == "X-Frame-Options"):
                        headers[name] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _frame_origins(conn: HTTPConnection) -> tuple[str, ...]:
    """The origins that may frame this answer: those of this request's LTI session, if any."""
    app = conn.scope.get("app")
    readers = getattr(getattr(app, "state", None), "readers", None)
    if readers is None:
        return ()
    return tuple(o for o in readers.frame_origins(conn) if is_origin(o))


def is_served(path: str) -> bool:
    """Whether a path under static/ (as StaticFiles normalises it) is public."""
    parts = PurePosixPath(path.replace("\\", "/")).parts
    if not parts or ".." in parts:
        return False
    if len(parts) == 1:
        return PurePosixPath(parts[0]).suffix in SERVED_TOP_LEVEL_SUFFIXES
    return parts[0] in SERVED_FOLDERS


class PublicStaticFiles(StaticFiles):
    """StaticFiles that answers 404 for anything under static/ a page does not need."""

    def lookup_path(self, path: str) -> tuple[str, os.stat_result | None]:
        if not is_served(path):
            return "", None
        return super().lookup_path(path)
