"""LTI 1.3 tool routes: /lti/jwks (the tool's public key), /lti/login (third-party initiated
login: the LMS sends the browser here, and it goes back to the LMS's authorization URL with a
state and nonce) and /lti/launch (the LMS posts the signed id_token here; pylti1p3 checks it,
the LMS user is signed in and lands on the chapter the link names).

pylti1p3's session is a dict kept in the `kplay_lti` cookie, signed with the app's secret
key. Over https it and pylti1p3's state cookie are SameSite=None, Secure and Partitioned,
since the launch is a cross-site form post, often from inside the LMS's frame. The session a
launch begins is an LTI session (app/readers.py): its pages may be framed by the LMS's origins
(the registered platform's, and the LMS's address in the verified launch), and its cookie is
SameSite=None, Secure and Partitioned over https so that it comes back inside that frame.
Every other page keeps `frame-ancestors 'none'` (app/guards.py).
"""

from __future__ import annotations

import logging
from typing import Any

import jwt
from fastapi import APIRouter, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer
from pylti1p3.exception import LtiException, OIDCException

from kplay.app.readers import cookie_header
from kplay.app.routers.accounts import _signed_in
from kplay.app.services import lti
from kplay.app.services.ltigrades import AGS_CLAIM, link_grades
from kplay.app.services.ltiplatforms import LtiError, tool_jwks

log = logging.getLogger(__name__)
router = APIRouter(include_in_schema=False)
COOKIE = "kplay_lti"
SALT = "kplay.lti-session"
# From the login to the launch: the LMS answers at once, unless it asks the user to log in.
SESSION_MAX_AGE_S = 10 * 60
# Keys kept in the cookie: a few logins at once (links opened in several tabs).
SESSION_KEYS = 16


def _db(request: Request) -> Any:
    db = request.app.state.services.db
    if db is None:
        raise RuntimeError("the app has not started: use it inside its lifespan")
    return db


def _signer(request: Request) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(request.app.state.account_form_secret, salt=SALT)


def _session(request: Request) -> dict[str, Any]:
    raw = request.cookies.get(COOKIE, "")
    try:
        found = _signer(request).loads(raw, max_age=SESSION_MAX_AGE_S) if raw else {}
    except BadSignature:
        found = {}
    return found if isinstance(found, dict) else {}


def _keep_session(request: Request, response: Response, session: dict[str, Any]) -> None:
    kept = dict(list(session.items())[-SESSION_KEYS:])
    secure = request.url.scheme == "https"
    header = cookie_header(
        COOKIE,
        _signer(request).dumps(kept),
        partitioned=secure,
        max_age=SESSION_MAX_AGE_S,
        path="/lti/",
        httponly=True,
        secure=secure,
        samesite="none" if secure else "lax",
    )
    response.headers.append("set-cookie", header)


def _request(request: Request, params: dict[str, str]) -> lti.StarletteLtiRequest:
    return lti.StarletteLtiRequest(
        params, request.cookies, request.url.scheme == "https", _session(request)
    )


@router.get("/lti/jwks", name="lti_jwks")
async def jwks(request: Request) -> Response:
    keys = await run_in_threadpool(tool_jwks, _db(request))
    return JSONResponse(keys, headers={"Cache-Control": "public, max-age=300"})


@router.api_route("/lti/login", methods=["GET", "POST"], name="lti_login")
async def login(request: Request) -> Response:
    params = dict(request.query_params)
    if request.method == "POST":
        params.update({k: str(v) for k, v in (await request.form()).items()})
    req = _request(request, params)
    launch_url = str(request.url_for("lti_launch"))

    def redirect() -> Response:
        conf = lti.DatabaseToolConf(_db(request))
        return lti.StarletteOIDCLogin(req, conf).redirect(launch_url)

    try:
        response = await run_in_threadpool(redirect)
    except OIDCException as exc:
        raise HTTPException(400, _login_refusal(str(exc), params)) from None
    _keep_session(request, response, req.session)
    return response


def _login_refusal(text: str, params: dict[str, str]) -> str:
    if "issuer" in text:
        why = "it names no issuer ('iss')"
    elif "login hint" in text:
        why = "it carries no 'login_hint'"
    elif "registration" in text:
        why = (
            f"no LTI platform is registered with issuer {params.get('iss', '')[:200]!r} and "
            f"client id {params.get('client_id', '')[:100]!r}; an admin registers it with "
            "`kplay admin add-lti-platform`"
        )
    else:
        why = text[:200]
    return f"this LTI login is refused: {why}"


@router.post("/lti/launch", name="lti_launch")
async def launch(request: Request) -> Response:
    form = await request.form()
    params = {k: str(v) for k, v in form.items()}
    req = _request(request, params)
    services = request.app.state.services

    def land() -> tuple[int, str, tuple[str, ...]]:
        db = _db(request)
        conf = lti.DatabaseToolConf(db)
        message = lti.StarletteMessageLaunch(req, conf)
        body = message.get_launch_data()  # every check of the launch runs here
        message.session.forget_nonce(str(body.get("nonce")))
        if not message.is_resource_launch():
            raise LtiError("this tool takes resource-link launches only (a link to a chapter)")
        assert conf.found is not None  # the registration was found, or it raised
        slug = lti.chapter_slug(body)
        try:
            chapter = services.book.chapter(slug)
        except KeyError:
            raise LtiError(
                f"the link names chapter {slug!r}, which this book does not have"
            ) from None
        user = lti.lti_account(db, conf.found.issuer, body)
        exercise = lti.custom_exercise(body)
        if exercise is not None:
            try:
                services.book.cell(exercise)
            except KeyError:
                raise LtiError(
                    f"the link names exercise {exercise!r}, which the book lacks"
                ) from None
        elif len(chapter.cells) == 1:
            exercise = chapter.cells[0].id
        if exercise is not None:
            link_grades(db, user.id, exercise, conf.found, body)
        elif AGS_CLAIM in body:
            log.warning("LTI launch with a line item but no exercise (chapter %s)", slug)
        found = conf.found
        framing = lti.frame_origins((found.issuer, found.auth_login_url), body)
        return user.id, chapter.url, framing

    try:
        user_id, target, framing = await run_in_threadpool(land)
    except LtiException as exc:
        raise HTTPException(403, _launch_refusal(str(exc), params)) from None
    except LtiError as exc:
        raise HTTPException(403, f"this LTI launch is refused: {exc}") from None
    response = _signed_in(request, user_id, target)
    # The session this launch began is an LTI session: the LMS may frame its pages.
    request.app.state.readers.frame(request, framing)
    _keep_session(request, response, req.session)
    return response


def _claims(params: dict[str, str]) -> dict[str, Any]:
    """The id_token's claims unverified: only to name them in a refusal."""
    try:
        found = jwt.decode(params.get("id_token", ""), options={"verify_signature": False})
    except jwt.PyJWTError:
        return {}
    return found if isinstance(found, dict) else {}


def _launch_refusal(text: str, params: dict[str, str]) -> str:
    claims = _claims(params)
    issuer = str(claims.get("iss", ""))[:200]
    if "state" in text.lower():
        why = (
            "its state does not match a login started in this browser (the login was in "
            "another browser, its cookies were blocked, or the launch is forged)"
        )
    elif "nonce" in text.lower():
        why = "its nonce was not issued by this tool's login, or it was used already (a replay)"
    elif "registration" in text.lower() or "client id" in text.lower():
        why = (
            f"no LTI platform is registered with issuer {issuer!r} and client id "
            f"{claims.get('aud')!r}"
        )
    elif "decode id_token" in text or "public key" in text:
        why = f"the id_token's signature does not verify with the keys of {issuer!r}"
    elif "deployment" in text.lower():
        deployment = claims.get(lti.CLAIM + "deployment_id")
        why = f"deployment {deployment!r} of {issuer!r} is not registered here"
    elif "id_token" in text.lower() or "jwt" in text.lower():
        why = "it carries no readable id_token"
    else:
        why = text[:200]
    log.info("LTI launch refused: %s", text)
    return f"this LTI launch is refused: {why}"
