"""Sign-up, log-in, log-out and the account page (forms), and the account's JSON API
(who am I; a token for an e-mail and password, which `kplay login` asks for).

Every form carries the session's signed form token (app.accounts.check_form). Signing up or
logging in moves the anonymous reader's runs to the account and starts a new session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import BaseModel, Field
from slowapi.errors import RateLimitExceeded

from kplay.app import accounts as web_accounts
from kplay.app.deps import ServicesDep, UserDep
from kplay.app.render import render
from kplay.app.schemas import ErrorOut
from kplay.app.services.access import Viewer
from kplay.app.services.accounts import MIN_PASSWORD, AccountError, TokenInfo

router = APIRouter(include_in_schema=False)
api_router = APIRouter(prefix="/api/v1", tags=["account"])
FormText = Annotated[str, Form()]
WRONG = "the e-mail address or the password is wrong"
UNAUTHORIZED: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "the bearer token (or e-mail and password) is wrong"}
}
TOO_MANY: dict[int | str, dict[str, Any]] = {
    422: {"model": ErrorOut, "description": "a field is missing or wrong; the message names it"},
    429: {"model": ErrorOut, "description": "too many attempts (with Retry-After)"},
}


@dataclass
class AccountPage:
    title: str
    csrf: str
    next: str = ""
    email: str = ""
    display_name: str = ""
    error: str = ""
    error_field: str = ""
    notice: str = ""
    min_password: int = MIN_PASSWORD
    viewer: Viewer | None = None
    hide_name: bool = False
    tokens: list[TokenInfo] = field(default_factory=list)
    new_token: str = ""


def _safe_next(target: str) -> str:
    """Only a path of this site: never another host (`//host`, `/\\host`, `https:`)."""
    if not target.startswith("/") or target.startswith(("//", "/\\")) or "\n" in target:
        return ""
    if target.split("?")[0] in ("/login", "/signup", "/logout"):
        return ""
    return target


def _form_page(
    request: Request, services: ServicesDep, name: str, status: int = 200, **values: Any
) -> Response:
    page = AccountPage(csrf=web_accounts.form_token(request), **values)
    return render(request, services, name, status_code=status, page=page)


def _limited(request: Request, exc: RateLimitExceeded) -> tuple[str, dict[str, str]]:
    wait = request.app.state.run_limits.retry_after_s(request)
    message = f"too many attempts: {exc.detail} allowed; try again in {wait} s"
    return message, {"Retry-After": str(wait)}


def _signed_in(request: Request, user_id: int, target: str) -> Response:
    """Move the reader's runs to the account, then start the account's session."""
    readers = request.app.state.readers
    web_accounts.accounts_of(request).claim_runs(readers.user(request), user_id)
    readers.begin(request, user_id)
    return RedirectResponse(_safe_next(target) or "/account", status_code=303)


# ---------------------------------------------------------------- sign-up and log-in


@router.get("/signup", response_class=HTMLResponse)
def signup_page(request: Request, services: ServicesDep, next: str = "") -> Response:
    return _form_page(request, services, "accounts_signup.html", title="Sign up", next=next)


@router.post("/signup", response_class=HTMLResponse)
def signup(
    request: Request,
    services: ServicesDep,
    email: FormText = "",
    password: FormText = "",
    display_name: FormText = "",
    csrf: FormText = "",
    next: FormText = "",
) -> Response:
    web_accounts.check_form(request, csrf)
    again = {"title": "Sign up", "next": next, "email": email, "display_name": display_name}
    try:
        web_accounts.login_limits(request).check_sign_up(request)
        user = web_accounts.accounts_of(request).create(email, password, display_name)
    except RateLimitExceeded as exc:
        message, headers = _limited(request, exc)
        page = _form_page(request, services, "accounts_signup.html", 429, error=message, **again)
        page.headers.update(headers)
        return page
    except AccountError as exc:
        return _form_page(
            request,
            services,
            "accounts_signup.html",
            422,
            error=exc.message,
            error_field=exc.field,
            **again,
        )
    return _signed_in(request, user.id, next)


@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request, services: ServicesDep, next: str = "") -> Response:
    return _form_page(request, services, "accounts_login.html", title="Log in", next=next)


@router.post("/login", response_class=HTMLResponse)
def login(
    request: Request,
    services: ServicesDep,
    email: FormText = "",
    password: FormText = "",
    csrf: FormText = "",
    next: FormText = "",
) -> Response:
    web_accounts.check_form(request, csrf)
    again = {"title": "Log in", "next": next, "email": email}
    try:
        web_accounts.login_limits(request).check_log_in(request, email)
    except RateLimitExceeded as exc:
        message, headers = _limited(request, exc)
        page = _form_page(request, services, "accounts_login.html", 429, error=message, **again)
        page.headers.update(headers)
        return page
    user = web_accounts.accounts_of(request).authenticate(email, password)
    if user is None:
        return _form_page(request, services, "accounts_login.html", 401, error=WRONG, **again)
    return _signed_in(request, user.id, next)


@router.post("/logout")
def logout(request: Request, csrf: FormText = "") -> Response:
    web_accounts.check_form(request, csrf)
    request.app.state.readers.begin(request, None)
    return RedirectResponse("/", status_code=303)


# ---------------------------------------------------------------- the account page


def _account_page(
    request: Request, services: ServicesDep, viewer: Viewer, status: int = 200, **values: Any
) -> Response:
    if viewer.account_id is None:
        return RedirectResponse("/login?next=/account", status_code=303)
    store = web_accounts.accounts_of(request)
    user = store.get(viewer.account_id)
    assert user is not None  # the viewer was made from it in this request
    values.setdefault("display_name", user.display_name)
    return _form_page(
        request,
        services,
        "accounts_page.html",
        status,
        title="Your account",
        viewer=viewer,
        email=user.email,
        hide_name=user.hide_name,
        tokens=store.tokens(user.id),
        **values,
    )


@router.get("/account", response_class=HTMLResponse)
def account_page(request: Request, services: ServicesDep) -> Response:
    return _account_page(request, services, web_accounts.viewer(request))


@router.post("/account", response_class=HTMLResponse)
def update_account(
    request: Request,
    services: ServicesDep,
    display_name: FormText = "",
    hide_name: FormText = "",
    csrf: FormText = "",
) -> Response:
    web_accounts.check_form(request, csrf)
    viewer = web_accounts.viewer(request)
    if viewer.account_id is None:
        return RedirectResponse("/login?next=/account", status_code=303)
    try:
        web_accounts.accounts_of(request).update_profile(
            viewer.account_id, display_name, hide_name == "on"
        )
    except AccountError as exc:
        return _account_page(
            request,
            services,
            viewer,
            422,
            error=exc.message,
            error_field=exc.field,
            display_name=display_name,
        )
    request.state.viewer = None  # the name changed: shown as it is now
    return _account_page(request, services, web_accounts.viewer(request), notice="Saved.")


@router.post("/account/tokens", response_class=HTMLResponse)
def create_token(
    request: Request, services: ServicesDep, token_name: FormText = "", csrf: FormText = ""
) -> Response:
    web_accounts.check_form(request, csrf)
    viewer = web_accounts.viewer(request)
    if viewer.account_id is None:
        return RedirectResponse("/login?next=/account", status_code=303)
    try:
        _, token = web_accounts.accounts_of(request).create_token(viewer.account_id, token_name)
    except AccountError as exc:
        return _account_page(
            request, services, viewer, 422, error=exc.message, error_field=exc.field
        )
    return _account_page(request, services, viewer, 201, new_token=token)


@router.post("/account/tokens/{token_id}/revoke", response_class=HTMLResponse)
def revoke_token(
    token_id: int, request: Request, services: ServicesDep, csrf: FormText = ""
) -> Response:
    web_accounts.check_form(request, csrf)
    viewer = web_accounts.viewer(request)
    if viewer.account_id is None:
        return RedirectResponse("/login?next=/account", status_code=303)
    if not web_accounts.accounts_of(request).revoke_token(viewer.account_id, token_id):
        return _account_page(request, services, viewer, 404, error="no such token of yours")
    return _account_page(request, services, viewer, notice="Token revoked.")


# ---------------------------------------------------------------- the JSON API


class AccountOut(BaseModel):
    signed_in: bool = Field(description="false for an anonymous reader")
    email: str | None
    display_name: str | None
    role: str | None = Field(description="learner, instructor or admin")


class TokenRequest(BaseModel):
    email: str = Field(max_length=254)
    password: str = Field(max_length=1024)
    name: str = Field(default="kplay CLI", max_length=80, description="what the token is for")


class TokenOut(BaseModel):
    id: int
    name: str
    token: str = Field(description="shown this once; only its hash is kept")


@api_router.get(
    "/account",
    response_model=AccountOut,
    summary="Who the request acts as",
    description="With `Authorization: Bearer <token>`, the token's account; else the "
    "account signed in on the session cookie, or an anonymous reader.",
    responses=UNAUTHORIZED,
)
def whoami(user: UserDep) -> AccountOut:
    viewer = user if isinstance(user, Viewer) else Viewer(user)
    return AccountOut(
        signed_in=viewer.signed_in,
        email=viewer.email,
        display_name=viewer.display_name,
        role=viewer.role,
    )


@api_router.post(
    "/tokens",
    status_code=201,
    response_model=TokenOut,
    summary="An API token for an e-mail and password",
    description="Send it back as `Authorization: Bearer <token>` to act as the account. "
    "Attempts are rate limited per address and per e-mail.",
    responses={**UNAUTHORIZED, **TOO_MANY},
)
def token_for_password(body: TokenRequest, request: Request) -> TokenOut:
    store = web_accounts.accounts_of(request)
    try:
        web_accounts.login_limits(request).check_log_in(request, body.email)
    except RateLimitExceeded as exc:
        message, headers = _limited(request, exc)
        raise HTTPException(429, message, headers=headers) from None
    user = store.authenticate(body.email, body.password)
    if user is None:
        raise HTTPException(401, WRONG)
    try:
        info, token = store.create_token(user.id, body.name)
    except AccountError as exc:
        raise HTTPException(422, f"name: {exc.message}") from None
    return TokenOut(id=info.id, name=info.name, token=token)
