"""Real HTTP servers for the single sign-on tests: a Starlette app served by uvicorn on a free
local port in a thread, and a minimal OpenID provider (discovery, JWKS, authorize, token)
that signs RS256 ID tokens with a key made for the test."""

from __future__ import annotations

import base64
import hashlib
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import uvicorn
from joserfc import jwt
from joserfc.jwk import RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route


@contextmanager
def serve(app: Starlette) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 at a free port; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the local test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def b64_sha256(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()


@dataclass
class OpenIdProvider:
    """The provider's behaviour: the ID token's claims come from `user`, and `tamper` may
    override any claim (a wrong nonce or audience) for the next token."""

    client_id: str = "kplay-test-client"
    client_secret: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    key: RSAKey = field(default_factory=lambda: RSAKey.generate_key(2048, {"kid": "op-1"}))
    user: dict[str, Any] = field(default_factory=dict)
    tamper: dict[str, Any] = field(default_factory=dict)
    issuer: str = ""
    # What discovery says the issuer is, when not `issuer` (a provider misregistered here).
    claimed_issuer: str = ""
    codes: dict[str, dict[str, str]] = field(default_factory=dict)
    token_requests: int = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/.well-known/openid-configuration", self.discovery),
                Route("/jwks", self.jwks),
                Route("/authorize", self.authorize),
                Route("/token", self.token, methods=["POST"]),
            ]
        )

    async def discovery(self, request: Request) -> Response:
        return JSONResponse(
            {
                "issuer": self.claimed_issuer or self.issuer,
                "authorization_endpoint": f"{self.issuer}/authorize",
                "token_endpoint": f"{self.issuer}/token",
                "jwks_uri": f"{self.issuer}/jwks",
                "response_types_supported": ["code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "code_challenge_methods_supported": ["S256"],
            }
        )

    async def jwks(self, request: Request) -> Response:
        return JSONResponse({"keys": [self.key.as_dict(private=False)]})

    async def authorize(self, request: Request) -> Response:
        q = request.query_params
        if q.get("client_id") != self.client_id or q.get("code_challenge_method") != "S256":
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        code = secrets.token_urlsafe(16)
        self.codes[code] = {
            "nonce": q.get("nonce", ""),
            "challenge": q.get("code_challenge", ""),
            "redirect_uri": q.get("redirect_uri", ""),
        }
        back = {"code": code, "state": q.get("state", "")}
        return RedirectResponse(f"{q['redirect_uri']}?{urlencode(back)}", status_code=302)

    def _client_ok(self, request: Request, form: Any) -> bool:
        header = request.headers.get("authorization", "")
        if header.startswith("Basic "):
            given = base64.b64decode(header[6:]).decode()
            return given == f"{self.client_id}:{self.client_secret}"
        return (form.get("client_id"), form.get("client_secret")) == (
            self.client_id,
            self.client_secret,
        )

    async def token(self, request: Request) -> Response:
        self.token_requests += 1
        form = await request.form()
        grant = self.codes.pop(str(form.get("code")), None)
        if not self._client_ok(request, form):
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        if grant is None or form.get("redirect_uri") != grant["redirect_uri"]:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        if b64_sha256(str(form.get("code_verifier", ""))) != grant["challenge"]:
            return JSONResponse({"error": "invalid_grant", "error_description": "PKCE"}, 400)
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "aud": self.client_id,
            "iat": now,
            "exp": now + 300,
            "nonce": grant["nonce"],
            **self.user,
            **self.tamper,
        }
        id_token = jwt.encode({"alg": "RS256", "kid": "op-1"}, claims, self.key)
        return JSONResponse(
            {
                "access_token": secrets.token_urlsafe(16),
                "token_type": "Bearer",
                "expires_in": 300,
                "id_token": id_token,
            }
        )


@contextmanager
def running_provider() -> Iterator[OpenIdProvider]:
    provider = OpenIdProvider()
    with serve(provider.app()) as url:
        provider.issuer = url
        yield provider
