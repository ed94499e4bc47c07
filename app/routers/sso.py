"""Single sign-on through OpenID Connect: /sso/{name}/login and /sso/{name}/callback.

authlib's Starlette client does the protocol: an authorization-code request with PKCE (S256),
a random state and nonce; at the callback, the state check, the code exchange, and the ID
token's signature (the provider's JWKS), issuer, audience, expiry and nonce. Its state lives
in `request.session`; this app has no session middleware, so the two routes keep that dict
in a short-lived cookie of its own, signed with the app's secret key and bound to the reader
who started the sign-in.

`install` also mounts the LTI routes (app/routers/lti.py) and gives the templates
`sso_providers()`, the names the log-in page offers.
"""

from __future__ import annotations

import hmac
import logging
from typing import Any

import httpx
from authlib.common.errors import AuthlibBaseError
from authlib.integrations.starlette_client import OAuth
from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from itsdangerous import BadSignature, URLSafeTimedSerializer
from joserfc.errors import JoseError

from kplay.app.deps import Services
from kplay.app.routers.accounts import _safe_next, _signed_in
from kplay.app.services.sso import OidcProviders, ProviderInfo, SsoError, oidc_account

log = logging.getLogger(__name__)
router = APIRouter(include_in_schema=False)
COOKIE = "kplay_sso"
SALT = "kplay.sso-state"
# Time to choose an account and type a password at the provider.
STATE_MAX_AGE_S = 15 * 60
HTTP_TIMEOUT_S = 15
_OAuth = OAuth  # authlib's registry type; one per app, made in `install`


def _providers(request: Request) -> OidcProviders:
    db = request.app.state.services.db
    if db is None:
        raise RuntimeError("the app has not started: use it inside its lifespan")
    return OidcProviders(db)


def _client(request: Request, provider: ProviderInfo) -> Any:
    """authlib's client for `provider`, registered once per distinct configuration (a
    provider removed and added again with other values gets a new one)."""
    oauth: OAuth = request.app.state.sso_oauth
    key = (
        "p"
        + hmac.new(
            b"kplay.sso",
            "\n".join(
                [provider.name, provider.issuer, provider.client_id, provider.client_secret]
            ).encode(),
            "sha256",
        ).hexdigest()[:24]
    )
    found = oauth.create_client(key)
    if found is not None:
        return found
    return oauth.register(
        key,
        client_id=provider.client_id,
        client_secret=provider.client_secret,
        server_metadata_url=provider.metadata_url,
        client_kwargs={
            "scope": provider.scope,
            "code_challenge_method": "S256",
            "timeout": HTTP_TIMEOUT_S,
        },
    )


def _signer(request: Request) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(request.app.state.account_form_secret, salt=SALT)


def _provider(request: Request, name: str) -> ProviderInfo:
    provider = _providers(request).get(name)
    if provider is None:
        raise HTTPException(404, f"no sign-in provider is named {name!r} here")
    return provider


@router.get("/sso/{name}/login", name="sso_login")
async def sso_login(name: str, request: Request, next: str = "") -> Response:
    provider = await run_in_threadpool(_provider, request, name)
    client = _client(request, provider)
    session: dict[str, Any] = {}
    request.scope["session"] = session
    callback = str(request.url_for("sso_callback", name=name))
    try:
        metadata = await client.load_server_metadata()
        response = await client.authorize_redirect(request, callback)
    except (httpx.HTTPError, AuthlibBaseError, ValueError, KeyError) as exc:
        log.warning("OpenID provider %s: %s", name, exc)
        raise HTTPException(
            502,
            f"the sign-in provider {name!r} does not answer with its OpenID configuration at "
            f"{provider.metadata_url}; try again later or log in with your password",
        ) from None
    if str(metadata.get("issuer", "")).rstrip("/") != provider.issuer.rstrip("/"):
        raise HTTPException(
            502,
            f"the sign-in provider {name!r} calls itself {str(metadata.get('issuer'))[:200]!r}, "
            f"not the issuer registered here ({provider.issuer}); an admin must correct it",
        )
    reader = request.app.state.readers.current(request)
    payload = {"s": session, "next": _safe_next(next), "reader": reader, "p": name}
    response.set_cookie(
        COOKIE,
        _signer(request).dumps(payload),
        max_age=STATE_MAX_AGE_S,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
        path="/sso/",
    )
    return response


def _saved(request: Request, name: str) -> dict[str, Any]:
    """The sign-in this browser started with `name`, or a 400 that says what is wrong."""
    raw = request.cookies.get(COOKIE, "")
    try:
        payload = _signer(request).loads(raw, max_age=STATE_MAX_AGE_S) if raw else None
    except BadSignature:
        payload = None
    reader = request.app.state.readers.current(request)
    if (
        not isinstance(payload, dict)
        or payload.get("p") != name
        or not hmac.compare_digest(str(payload.get("reader", "")), reader)
    ):
        raise HTTPException(
            400,
            "this sign-in was not started in this browser, or it took longer than "
            f"{STATE_MAX_AGE_S // 60} minutes; start it again from the log-in page",
        )
    return payload


@router.get("/sso/{name}/callback", name="sso_callback")
async def sso_callback(name: str, request: Request) -> Response:
    provider = await run_in_threadpool(_provider, request, name)
    saved = _saved(request, name)
    request.scope["session"] = dict(saved.get("s") or {})
    client = _client(request, provider)
    try:
        token = await client.authorize_access_token(request)
    except (AuthlibBaseError, JoseError, httpx.HTTPError, ValueError, KeyError) as exc:
        raise HTTPException(403, _refusal(name, exc)) from None
    claims = token.get("userinfo")
    if not claims:
        raise HTTPException(403, f"{name!r} sent no ID token; it is not an OpenID provider")
    db = request.app.state.services.db
    try:
        user = await run_in_threadpool(oidc_account, db, provider, dict(claims))
    except SsoError as exc:
        raise HTTPException(403, f"sign-in with {name!r} refused: {exc}") from None
    response = _signed_in(request, user.id, str(saved.get("next") or ""))
    response.delete_cookie(COOKIE, path="/sso/")
    return response


def _refusal(name: str, exc: Exception) -> str:
    """What went wrong at the callback, in words (authlib's errors name a claim or a code)."""
    text = str(exc)
    claim = getattr(exc, "claim", None)
    if getattr(exc, "error", "") == "mismatching_state":
        why = "the state sent back does not match the sign-in started here (a stale or forged link)"
    elif claim == "nonce":
        why = "the ID token's nonce is not the one this sign-in sent (a replayed token)"
    elif claim in ("aud", "azp"):
        why = "the ID token was issued for another client (its audience is not this site)"
    elif claim == "iss":
        why = "the ID token's issuer is not the provider's"
    elif claim is not None:
        why = f"the ID token's claim {claim!r} is missing or wrong"
    elif getattr(exc, "error", "") == "expired_token":
        why = "the ID token has expired"
    elif getattr(exc, "error", "") == "bad_signature":
        why = "the ID token's signature does not verify with the provider's keys"
    elif isinstance(exc, httpx.HTTPError):
        why = f"the provider does not answer ({type(exc).__name__})"
    else:
        why = f"the provider refused or sent an unusable answer ({text[:160]})"
    log.info("sign-in with %s refused: %s", name, text)
    return f"sign-in with {name!r} refused: {why}; start again from the log-in page"


def install(app: FastAPI, services: Services) -> None:
    """Mount the single sign-on and LTI routes; give the templates `sso_providers()`."""
    from kplay.app.routers import lti

    app.state.sso_oauth = _OAuth()
    app.include_router(router)
    app.include_router(lti.router)

    def provider_names() -> list[str]:
        if services.db is None:
            return []
        return [p.name for p in OidcProviders(services.db).all()]

    services.templates.env.globals["sso_providers"] = provider_names
