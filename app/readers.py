"""Anonymous readers: one random id per browser, kept in a cookie.

Until accounts exist, this is what makes a run history "mine" and what the per-user cap
counts. The id carries no personal data and is not a credential.
"""

from __future__ import annotations

import re
import uuid

from fastapi import Request, Response

COOKIE = "kplay_reader"
_VALID = re.compile(r"^[a-f0-9]{32}$")
MAX_AGE_S = 400 * 24 * 3600


def _cookie(request: Request) -> str | None:
    value = request.cookies.get(COOKIE)
    return value if value and _VALID.match(value) else None


def ensure_reader(request: Request) -> bool:
    """Give a page request a reader id; True when it is new and must be sent back.

    JSON API and static requests get none: a script without the cookie is the shared
    anonymous reader, so its runs and its history stay together.
    """
    if request.url.path.startswith(("/api/", "/static/")):
        return False
    existing = _cookie(request)
    if existing:
        request.state.reader = existing
        return False
    request.state.reader = uuid.uuid4().hex
    return True


def remember_reader(request: Request, response: Response) -> None:
    response.set_cookie(
        COOKIE, request.state.reader, max_age=MAX_AGE_S, httponly=True, samesite="lax"
    )


def reader_name(request: Request, anonymous: str) -> str:
    reader = getattr(request.state, "reader", None) or _cookie(request)
    return f"{anonymous}-{reader[:12]}" if reader else anonymous
