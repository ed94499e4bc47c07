"""Who is asking: the account behind a request (an API token, or the account signed in on
the session cookie) or else the anonymous reader; the account forms' CSRF token; and the
rate limit on log-in attempts.

`viewer` is what every handler gets as its user (`kplay.app.deps.UserDep`): a `Viewer`, the
owner name runs are stored under, carrying the account and its role.
"""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request
from itsdangerous import BadSignature, URLSafeTimedSerializer
from slowapi import Limiter

from kplay.app.readers import ReaderSessions
from kplay.app.services.access import Viewer
from kplay.app.services.accounts import Accounts, viewer_of
from kplay.app.services.cohorts import Teaching

FORM_SALT = "kplay.account-form"
# A form's token outlives a long pause on the page, not a day.
FORM_MAX_AGE_S = 6 * 3600
# Log-in (and sign-up, and token) attempts: per client address, and per e-mail address.
LOGIN_RATE_PER_ADDRESS = "10/minute;60/hour"
LOGIN_RATE_PER_EMAIL = "5/minute;30/hour"
PER_ADDRESS = "log-ins-per-address"
PER_EMAIL = "log-ins-per-email"
BEARER_REFUSED = {"WWW-Authenticate": 'Bearer realm="kplay"'}


def accounts_of(request: Request) -> Accounts:
    db = request.app.state.services.db
    if db is None:
        raise RuntimeError("the app has not started: use it inside its lifespan")
    return Accounts(db)


def _readers(request: Request) -> ReaderSessions:
    readers: ReaderSessions = request.app.state.readers
    return readers


def viewer(request: Request) -> Viewer:
    """This request's viewer, worked out once per request.

    On `/api/`, an `Authorization` header decides alone: a valid bearer token acts as its
    account, anything else is a 401 (never a silent fall back to the cookie). Otherwise the
    session's account, while it still exists; else the session's anonymous reader.
    """
    found = getattr(request.state, "viewer", None)
    if isinstance(found, Viewer):
        return found
    header = request.headers.get("authorization")
    if header is not None and request.url.path.startswith("/api/"):
        result = _bearer(request, header)
    else:
        readers = _readers(request)
        account = readers.account(request)
        user = accounts_of(request).get(account) if account is not None else None
        result = viewer_of(user) if user is not None else Viewer(readers.user(request))
    if result.role == "instructor" and result.account_id is not None:
        result.teaching = Teaching(request.app.state.services.db, result.account_id)
    request.state.viewer = result
    return result


def _bearer(request: Request, header: str) -> Viewer:
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise HTTPException(
            401, "send an API token as 'Authorization: Bearer <token>'", headers=BEARER_REFUSED
        )
    user = accounts_of(request).user_for_token(token.strip())
    if user is None:
        raise HTTPException(
            401,
            "this API token is not valid: it was revoked or mistyped; make a new one on your "
            "account page (/account) or with `kplay login`",
            headers=BEARER_REFUSED,
        )
    return viewer_of(user)


# ---------------------------------------------------------------- the forms' CSRF token


def _signer(request: Request) -> URLSafeTimedSerializer:
    secret = request.app.state.account_form_secret
    return URLSafeTimedSerializer(secret, salt=FORM_SALT)


def form_token(request: Request) -> str:
    """The hidden field of every account form: this session's reader id, signed."""
    return _signer(request).dumps(_readers(request).current(request))


def check_form(request: Request, token: str) -> None:
    """Refuse an account form not sent by this server's own page in this session.

    Another site's page can post a form here, and the browser may send the session cookie
    with a top-level post; it cannot read the signed token this session's page carries, so
    its post is refused. `Sec-Fetch-Site: cross-site` is refused too, as for runs.
    """
    refused = HTTPException(
        403, "this form has expired or was not sent from this site's page; reload it and retry"
    )
    if request.headers.get("sec-fetch-site") == "cross-site":
        raise refused
    try:
        signed_for = _signer(request).loads(token, max_age=FORM_MAX_AGE_S)
    except BadSignature:
        raise refused from None
    reader = _readers(request).current(request)
    if not isinstance(signed_for, str) or not hmac.compare_digest(signed_for, reader):
        raise refused


# ---------------------------------------------------------------- log-in attempts


class LoginLimits:
    """Slowapi limits on attempts to prove who one is, on the app's own limiter (the one that
    counts run starts, app/ratelimit.py), so they share its storage."""

    def __init__(self, limiter: Limiter) -> None:
        self.limiter = limiter

        def email_key(request: Request) -> str:
            return "email:" + str(getattr(request.state, "login_email", "")).strip().lower()

        @limiter.shared_limit(LOGIN_RATE_PER_ADDRESS, scope=PER_ADDRESS)
        @limiter.shared_limit(LOGIN_RATE_PER_EMAIL, scope=PER_EMAIL, key_func=email_key)
        def log_in(request: Request) -> None:
            return None

        @limiter.shared_limit(LOGIN_RATE_PER_ADDRESS, scope=PER_ADDRESS)
        def sign_up(request: Request) -> None:
            return None

        self._log_in, self._sign_up = log_in, sign_up

    def check_log_in(self, request: Request, email: str) -> None:
        """Count one attempt; RateLimitExceeded when the address or the e-mail has spent its."""
        request.state.login_email = email
        self._log_in(request=request)

    def check_sign_up(self, request: Request) -> None:
        self._sign_up(request=request)


def install(app: object, secret: str) -> None:
    """Give `app` (after app.ratelimit.install) its form signer and log-in limits."""
    state = app.state  # type: ignore[attr-defined]
    state.account_form_secret = secret
    state.login_limits = LoginLimits(state.run_limits.limiter)


def login_limits(request: Request) -> LoginLimits:
    limits: LoginLimits = request.app.state.login_limits
    return limits


def account_nav(request: Request) -> dict[str, object]:
    """Template context of every page: the signed-in account for the site's navigation."""
    try:
        found = viewer(request)
    except (HTTPException, RuntimeError):  # a bad bearer token on an error page; no database
        found = None
    return {"nav_accounts": True, "nav_account": found if found and found.signed_in else None}
