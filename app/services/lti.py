"""LTI 1.3 launches: pylti1p3's adapters for Starlette, and what a resource-link launch
means here. The registered platforms and the tool's key pair are in
app/services/ltiplatforms.py, grade passback in app/services/ltigrades.py.

pylti1p3 ships Django and Flask adapters only; the request, cookie, session and redirect
classes below are the Starlette ones. pylti1p3 checks a launch: the state against the
browser's cookie, the nonce against the login that issued it, the platform's registration
(issuer and client id), the id_token's RS256 signature (the platform's JWKS) and expiry, the
deployment, and the message type. Its "session" is a dict that lives in a cookie of the
app's own, signed with the app's secret key (app/routers/lti.py): no server-side store is
needed, which keeps several web workers interchangeable.

A launch signs the LMS user into the account linked to (issuer, sub), made on the first
launch from the user's e-mail (never an account that exists already: many an LMS lets users
type their own address) with the role the roles claim gives (Instructor ->
instructor, Learner or anything else -> learner; a later Instructor launch raises a learner
account to instructor, nothing ever lowers a role). A launch carrying the AGS endpoint claim
with a line item links that line item to (account, exercise); when a submission of that
exercise is graded (app/services/grading.py), its score is posted there.
"""

from __future__ import annotations

import hashlib
import re
import typing as t
from urllib.parse import urlsplit

import requests
from pylti1p3.cookie import CookieService
from pylti1p3.deployment import Deployment
from pylti1p3.message_launch import MessageLaunch
from pylti1p3.oidc_login import OIDCLogin
from pylti1p3.redirect import Redirect
from pylti1p3.request import Request
from pylti1p3.session import SessionService
from pylti1p3.tool_config.abstract import ToolConfAbstract
from starlette.responses import HTMLResponse, RedirectResponse, Response

from kplay.app.db.models import User
from kplay.app.db.session import Database
from kplay.app.readers import cookie_header
from kplay.app.services.ltigrades import with_timeout
from kplay.app.services.ltiplatforms import (
    LtiError,
    LtiPlatforms,
    PlatformInfo,
    registration,
    tool_key,
)
from kplay.app.services.sso import SsoError, account_for, linked

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
# The most origins an LTI session lets frame it (its signed cookie carries them).
MAX_FRAME_ORIGINS = 4
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"


# ---------------------------------------------------------------- pylti1p3 for Starlette


class StarletteLtiRequest(Request):
    """A request as pylti1p3 reads it: its parameters (query and form), cookies, and the
    session dict the route loaded from the app's signed LTI cookie."""

    def __init__(
        self,
        params: t.Mapping[str, str],
        cookies: t.Mapping[str, str],
        secure: bool,
        session: dict[str, t.Any],
    ) -> None:
        self._params = dict(params)
        self._cookies = dict(cookies)
        self._secure = secure
        self._session = session

    @property
    def session(self) -> dict[str, t.Any]:
        return self._session

    def get_param(self, key: str) -> t.Any:
        return self._params.get(key)

    def get_cookie(self, key: str) -> str | None:
        return self._cookies.get(key)

    def is_secure(self) -> bool:
        return self._secure


class StarletteCookieService(CookieService):
    """pylti1p3's short-lived cookies (the login's state), set on the response it returns.

    Over https they are SameSite=None and Secure: the launch is a cross-site form post from
    the LMS, which a Lax cookie would not come back with."""

    def __init__(self, request: StarletteLtiRequest) -> None:
        self._request = request
        self._to_set: dict[str, tuple[str, int | None]] = {}

    def _key(self, name: str) -> str:
        return f"{self._cookie_prefix}-{name}"

    def get_cookie(self, name: str) -> str | None:
        return self._request.get_cookie(self._key(name))

    def set_cookie(self, name: str, value: str | int, exp: int | None = 3600) -> None:
        self._to_set[self._key(name)] = (str(value), exp)

    def update_response(self, response: Response) -> None:
        secure = self._request.is_secure()
        for key, (value, exp) in self._to_set.items():
            header = cookie_header(
                key,
                value,
                partitioned=secure,
                max_age=exp,
                path="/lti/",
                httponly=True,
                secure=secure,
                samesite="none" if secure else "lax",
            )
            response.headers.append("set-cookie", header)


class LaunchSession(SessionService):
    """pylti1p3's session service on the cookie-held dict. A launch is acted on in the
    request that brings it, so the launch's data and the state's token hash are never
    kept (they would only swell the cookie)."""

    def save_launch_data(self, key: str, jwt_body: t.Mapping[str, t.Any]) -> None:
        return None

    def set_state_valid(self, state: str, id_token_hash: str) -> None:
        return None

    def forget_nonce(self, nonce: str) -> None:
        """A nonce signs in once: a replayed launch finds it gone."""
        self._request_session().pop(self._get_key("nonce", nonce), None)

    def _request_session(self) -> dict[str, t.Any]:
        request = self.data_storage._request
        assert request is not None
        return t.cast(dict[str, t.Any], request.session)


class StarletteRedirect(Redirect[Response]):
    def __init__(self, location: str, cookies: StarletteCookieService) -> None:
        self._location = location
        self._cookies = cookies

    def do_redirect(self) -> Response:
        response = RedirectResponse(self._location, status_code=302)
        self._cookies.update_response(response)
        return response

    def do_js_redirect(self) -> Response:
        return self.do_redirect()  # no script: the page's policy allows none inline

    def set_redirect_url(self, location: str) -> None:
        self._location = location

    def get_redirect_url(self) -> str:
        return self._location


class StarletteOIDCLogin(OIDCLogin[t.Any, t.Any, t.Any, t.Any, Response]):
    def __init__(self, request: StarletteLtiRequest, tool_config: DatabaseToolConf) -> None:
        self.cookies = StarletteCookieService(request)
        super().__init__(request, tool_config, LaunchSession(request), self.cookies)

    def get_redirect(self, url: str) -> Redirect[Response]:
        return StarletteRedirect(url, self.cookies)

    def get_response(self, html: str) -> Response:
        return HTMLResponse(html)


class StarletteMessageLaunch(MessageLaunch[t.Any, t.Any, t.Any, t.Any]):
    def __init__(self, request: StarletteLtiRequest, tool_config: DatabaseToolConf) -> None:
        self.session = LaunchSession(request)
        session = requests.Session()
        session.request = with_timeout(session.request)  # type: ignore[method-assign]
        super().__init__(
            request, tool_config, self.session, StarletteCookieService(request), None, session
        )

    def _get_request_param(self, key: str) -> t.Any:
        return self._request.get_param(key)


class DatabaseToolConf(ToolConfAbstract[StarletteLtiRequest]):
    """pylti1p3's tool configuration, read from the registered platforms. An issuer may
    have several client ids (one per registration of the tool in the LMS)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.platforms = LtiPlatforms(db)
        self.key = tool_key(db)
        self.found: PlatformInfo | None = None

    def check_iss_has_one_client(self, iss: str) -> bool:
        return False

    def check_iss_has_many_clients(self, iss: str) -> bool:
        return True

    def find_registration_by_issuer(self, iss: str, *args: t.Any, **kwargs: t.Any) -> t.Any:
        return self.find_registration_by_params(iss, None)

    def find_registration_by_params(
        self, iss: str, client_id: str | None, *args: t.Any, **kwargs: t.Any
    ) -> t.Any:
        self.found = self.platforms.find(iss, client_id)
        return registration(self.found, self.key) if self.found is not None else None

    def find_deployment(self, iss: str, deployment_id: str) -> Deployment | None:
        return self.find_deployment_by_params(iss, deployment_id, None)

    def find_deployment_by_params(
        self, iss: str, deployment_id: str, client_id: str | None, *args: t.Any, **kwargs: t.Any
    ) -> Deployment | None:
        platform = self.platforms.find(iss, client_id)
        if platform is None or deployment_id not in platform.deployment_ids:
            return None
        return Deployment().set_deployment_id(deployment_id)


# ---------------------------------------------------------------- what a launch means here


def role_of(roles: object) -> str:
    listed = roles if isinstance(roles, list) else []
    return "instructor" if INSTRUCTOR in listed else "learner"


def lti_account(db: Database, issuer: str, body: t.Mapping[str, t.Any]) -> User:
    """The account the launch's user signs in as (made on the first launch)."""
    from kplay.app.services.accounts import Accounts

    sub = str(body.get("sub") or "")
    email = str(body.get("email") or "").strip()
    source = "lti:" + issuer
    # Many an LMS lets its users type their own address: a launch never signs in to an
    # account made otherwise. An address that is missing, or taken by such an account,
    # gives way to a stand-in only this LMS user has.
    if not email or (linked(db, source, sub) is None and Accounts(db).by_email(email)):
        email = f"lti-{hashlib.sha256(f'{issuer}|{sub}'.encode()).hexdigest()[:20]}@lti.invalid"
    role = role_of(body.get(CLAIM + "roles"))
    name = str(body.get("name") or body.get("given_name") or "")
    try:
        user, _made = account_for(db, source, sub, email, True, name=name, role=role)
    except SsoError as exc:
        raise LtiError(str(exc)) from None
    if role == "instructor" and user.role == "learner":
        Accounts(db).set_role(user.id, "instructor")
    return user


CHAPTER_PATH = re.compile(r"/book/(?:p\d+/)?([A-Za-z0-9_.-]+)/?")


def chapter_slug(body: t.Mapping[str, t.Any]) -> str:
    """The chapter a launch opens: its custom parameter `chapter`, else the chapter its
    target_link_uri points to."""
    custom = body.get(CLAIM + "custom") or {}
    slug = str(custom.get("chapter") or "").strip() if isinstance(custom, dict) else ""
    if slug:
        return slug
    path = urlsplit(str(body.get(CLAIM + "target_link_uri") or "")).path
    match = CHAPTER_PATH.fullmatch(path)
    if match is None:
        raise LtiError(
            "the launch names no chapter: give the link a custom parameter chapter=<slug>, "
            "or a target link URI to /book/<part>/<slug>"
        )
    return match.group(1)


def custom_exercise(body: t.Mapping[str, t.Any]) -> str | None:
    custom = body.get(CLAIM + "custom") or {}
    found = custom.get("exercise") if isinstance(custom, dict) else None
    return str(found).strip() or None if found else None


def frame_origins(platform_urls: t.Iterable[str], body: t.Mapping[str, t.Any]) -> tuple[str, ...]:
    """The origins that may frame an LTI session's pages: those of the registered platform
    (its issuer and login URL) and the LMS's own address as its verified launch gives it
    (`launch_presentation.return_url`, `tool_platform.url`): an LMS such as Canvas signs its
    launches with one issuer for all its sites, and shows the tool inside its site's page."""
    found: list[str] = []
    presentation = body.get(CLAIM + "launch_presentation")
    platform = body.get(CLAIM + "tool_platform")
    claimed = [
        presentation.get("return_url") if isinstance(presentation, dict) else None,
        platform.get("url") if isinstance(platform, dict) else None,
    ]
    for url in [*platform_urls, *claimed]:
        if not isinstance(url, str):
            continue
        parts = urlsplit(url.strip())
        if parts.scheme in ("https", "http") and parts.hostname:
            port = f":{parts.port}" if parts.port else ""
            origin = f"{parts.scheme}://{parts.hostname.lower()}{port}"
            if origin not in found:
                found.append(origin)
    return tuple(found[:MAX_FRAME_ORIGINS])
