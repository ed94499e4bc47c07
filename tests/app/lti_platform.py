"""A small LMS acting as an LTI 1.3 platform, served on a real local port for the tests: its
JWKS, an authorization endpoint that answers a tool's login with a signed id_token in an
auto-posting form, a client-credentials token endpoint that checks the tool's signed
assertion against the tool's published key, and a line item's scores endpoint."""

from __future__ import annotations

import html
import re
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from joserfc.jwt import JWTClaimsRegistry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from tests.app.sso_servers import serve

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
AGS = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"
FIELD = re.compile(r'name="(\w+)" value="([^"]*)"')
ACTION = re.compile(r'action="([^"]+)"')


def _key() -> RSAKey:
    return RSAKey.generate_key(2048, {"kid": "lms-1", "alg": "RS256", "use": "sig"})


@dataclass
class Lms:
    """The platform. `user` and `custom` fill the next id_token; `tamper` overrides any of
    its claims; `sign_with` signs it with another key (of the same key id)."""

    client_id: str = "kplay-tool"
    deployment_id: str = "dep-1"
    launch_url: str = "http://testserver/lti/launch"
    key: RSAKey = field(default_factory=_key)
    sign_with: RSAKey | None = None
    issuer: str = ""
    user: dict[str, Any] = field(default_factory=dict)
    roles: list[str] = field(default_factory=lambda: [LEARNER])
    custom: dict[str, str] = field(default_factory=dict)
    ags: bool = True
    tamper: dict[str, Any] = field(default_factory=dict)
    tool_jwks: dict[str, Any] = field(default_factory=dict)
    tokens: set[str] = field(default_factory=set)
    scores: list[dict[str, Any]] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/jwks", self.jwks),
                Route("/auth", self.auth),
                Route("/token", self.token, methods=["POST"]),
                Route("/lineitems/1/lineitem/scores", self.score, methods=["POST"]),
            ]
        )

    @property
    def lineitem(self) -> str:
        return f"{self.issuer}/lineitems/1/lineitem"

    async def jwks(self, request: Request) -> Response:
        return JSONResponse({"keys": [self.key.as_dict(private=False)]})

    def claims(self, nonce: str) -> dict[str, Any]:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": self.client_id,
            "iat": now,
            "exp": now + 300,
            "nonce": nonce,
            "sub": "lms-user-7",
            "email": "grace@school.example",
            "name": "Grace H",
            CLAIM + "message_type": "LtiResourceLinkRequest",
            CLAIM + "version": "1.3.0",
            CLAIM + "deployment_id": self.deployment_id,
            CLAIM + "target_link_uri": "http://testserver/book/p1/first-kernel-cpu",
            CLAIM + "resource_link": {"id": "link-1", "title": "Chapter 1"},
            CLAIM + "roles": self.roles,
            CLAIM + "custom": self.custom,
            **self.user,
        }
        if self.ags:
            claims[AGS] = {
                "scope": [SCORE],
                "lineitem": self.lineitem,
                "lineitems": f"{self.issuer}/lineitems",
            }
        claims.update(self.tamper)
        return claims

    async def auth(self, request: Request) -> Response:
        q = request.query_params
        expected = {
            "scope": "openid",
            "response_type": "id_token",
            "response_mode": "form_post",
            "client_id": self.client_id,
            "redirect_uri": self.launch_url,
            "login_hint": "hint-7",
        }
        wrong = [k for k, v in expected.items() if q.get(k) != v]
        if wrong or not q.get("nonce") or not q.get("state"):
            return JSONResponse({"error": "invalid_request", "fields": wrong}, status_code=400)
        signer = self.sign_with or self.key
        kid = {"alg": "RS256", "kid": "lms-1"}
        id_token = jwt.encode(kid, self.claims(q["nonce"]), signer)
        fields = {"id_token": id_token, "state": q["state"]}
        inputs = "".join(
            f'<input type="hidden" name="{k}" value="{html.escape(v)}">' for k, v in fields.items()
        )
        form = f'<form method="post" action="{html.escape(q["redirect_uri"])}">{inputs}</form>'
        return HTMLResponse(form)

    async def token(self, request: Request) -> Response:
        form = await request.form()
        assertion = str(form.get("client_assertion", ""))
        try:
            token = jwt.decode(assertion, KeySet.import_key_set(self.tool_jwks))
            JWTClaimsRegistry(
                iss={"essential": True, "value": self.client_id},
                sub={"essential": True, "value": self.client_id},
                aud={"essential": True, "value": f"{self.issuer}/token"},
            ).validate(token.claims)
        except Exception as exc:  # noqa: BLE001 - any failure is a refusal, kept for the test
            self.refusals.append(f"token: {type(exc).__name__}: {exc}")
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        if form.get("grant_type") != "client_credentials" or SCORE not in str(form.get("scope")):
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        access = secrets.token_urlsafe(16)
        self.tokens.add(access)
        return JSONResponse({"access_token": access, "token_type": "Bearer", "expires_in": 3600})

    async def score(self, request: Request) -> Response:
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
        if bearer not in self.tokens:
            self.refusals.append("score: unknown bearer token")
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        if request.headers.get("content-type") != "application/vnd.ims.lis.v1.score+json":
            return JSONResponse({"error": "unsupported media type"}, status_code=415)
        self.scores.append(await request.json())
        return JSONResponse({})


def form_of(page: str) -> tuple[str, dict[str, str]]:
    """The action and the fields of the LMS's auto-posting form."""
    action = ACTION.search(page)
    assert action, page[:300]
    return html.unescape(action.group(1)), {k: html.unescape(v) for k, v in FIELD.findall(page)}


@contextmanager
def running_lms() -> Iterator[Lms]:
    lms = Lms()
    with serve(lms.app()) as url:
        lms.issuer = url
        yield lms
