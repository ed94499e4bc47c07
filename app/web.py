"""Wires the web layer's guards into an app: reader sessions, run-start rate limits, the
body-size limit and the security headers (see docs/security.md, "The web layer").

`install_guards` is called once by `create_app`. The refusals it adds (403 for a run
started from another machine in trusted local mode, 413, 429) speak the asker's
language: JSON `{"detail": ...}` on the API, the cell's error card for the playground's
own requests, an error page otherwise.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from kplay.app import accounts, ratelimit
from kplay.app.guards import BodyLimitMiddleware, BodyTooLarge, SecurityHeadersMiddleware
from kplay.app.localmode import LocalRunsOnly
from kplay.app.readers import ReaderCookieMiddleware, ReaderSessions
from kplay.app.render import error_page, render
from kplay.app.sessionkey import session_secret
from kplay.config import Settings


def refusal_response(
    request: Request, status: int, message: str, headers: dict[str, str] | None = None
) -> Response:
    """A refused request, answered as its asker reads answers."""
    if request.url.path.startswith(("/api/", "/static/")):
        return JSONResponse({"detail": message}, status_code=status, headers=headers)
    services = request.app.state.services
    if request.headers.get("hx-request") == "true":
        response = render(
            request, services, "fragments/input_error.html", status_code=status, message=message
        )
    else:
        response = error_page(request, services, status, message)
    response.headers.update(headers or {})
    return response


async def _refuse(request: Request, status: int, message: str) -> Response:
    return refusal_response(request, status, message)


def install_guards(app: FastAPI, settings: Settings) -> ReaderSessions:
    """Add the guards to `app`; returns its reader sessions."""
    secret = session_secret(settings)
    readers = ReaderSessions(secret, settings.anonymous_user)
    app.state.readers = readers
    ratelimit.install(app, settings, readers)
    accounts.install(app, secret)

    @app.exception_handler(ratelimit.RateLimitExceeded)
    async def rate_limited(request: Request, exc: ratelimit.RateLimitExceeded) -> Response:
        message, headers = ratelimit.refusal(request, exc)
        return refusal_response(request, 429, message, headers)

    @app.exception_handler(LocalRunsOnly)
    async def local_runs_only(request: Request, exc: LocalRunsOnly) -> Response:
        return refusal_response(request, 403, str(exc))

    @app.exception_handler(BodyTooLarge)
    async def body_too_large(request: Request, exc: BodyTooLarge) -> Response:
        return refusal_response(request, 413, str(exc.detail))

    # Added innermost first: the headers go on every answer, the body limit acts before
    # anything reads the body, and the reader's cookie rides on the answer that made it.
    app.add_middleware(ReaderCookieMiddleware, sessions=readers)
    app.add_middleware(BodyLimitMiddleware, limit=settings.body_limit(), refuse=_refuse)
    app.add_middleware(SecurityHeadersMiddleware)
    return readers
