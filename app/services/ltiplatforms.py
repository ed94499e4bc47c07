"""LTI 1.3 platforms (the LMSs the admin registered with `kplay admin add-lti-platform`) and
the tool's own RSA key pair, made on first use and kept in the database (the private half
never leaves it; the public half is served at /lti/jwks)."""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from pylti1p3.registration import Registration
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from kplay.app.db.session import Database
from kplay.app.db.ssomodels import LtiPlatform, LtiToolKey
from kplay.app.services.sso import SsoError, check_url

KEY_BITS = 2048


class LtiError(ValueError):
    """A registration, launch or grade refused; the message says why, in words."""


@dataclass(frozen=True)
class PlatformInfo:
    id: int
    issuer: str
    client_id: str
    auth_login_url: str
    auth_token_url: str
    key_set_url: str
    deployment_ids: tuple[str, ...]


def _platform(row: LtiPlatform) -> PlatformInfo:
    return PlatformInfo(
        row.id,
        row.issuer,
        row.client_id,
        row.auth_login_url,
        row.auth_token_url,
        row.key_set_url,
        tuple(row.deployment_ids),
    )


class LtiPlatforms:
    """The registered platforms, on the app's database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def add(
        self,
        issuer: str,
        client_id: str,
        auth_login_url: str,
        auth_token_url: str,
        key_set_url: str,
        deployment_ids: list[str],
    ) -> PlatformInfo:
        """Register a platform; a second call for the same issuer and client id adds its
        deployment ids and takes the URLs given."""
        try:
            urls = [
                check_url(issuer, "the issuer"),
                check_url(auth_login_url, "--auth-login-url"),
                check_url(auth_token_url, "--auth-token-url"),
                check_url(key_set_url, "--key-set-url"),
            ]
        except SsoError as exc:
            raise LtiError(str(exc)) from None
        deployments = [d.strip() for d in deployment_ids if d.strip()]
        if not client_id.strip() or not deployments:
            raise LtiError("give the client id and at least one deployment id the LMS shows")
        with self.db.session() as s:
            row = s.scalar(
                select(LtiPlatform).where(
                    LtiPlatform.issuer == urls[0], LtiPlatform.client_id == client_id.strip()
                )
            )
            if row is None:
                row = LtiPlatform(issuer=urls[0], client_id=client_id.strip(), deployment_ids=[])
                s.add(row)
            row.auth_login_url, row.auth_token_url, row.key_set_url = urls[1:]
            row.deployment_ids = sorted(set(row.deployment_ids) | set(deployments))
            s.flush()
            return _platform(row)

    def find(self, issuer: str, client_id: str | None) -> PlatformInfo | None:
        """The platform of `issuer` and `client_id`; without a client id, the issuer's only one."""
        stmt = select(LtiPlatform).where(LtiPlatform.issuer == issuer)
        if client_id:
            stmt = stmt.where(LtiPlatform.client_id == client_id)
        with self.db.session() as s:
            rows = list(s.scalars(stmt.limit(2)))
        return _platform(rows[0]) if len(rows) == 1 else None

    def get(self, platform_id: int) -> PlatformInfo | None:
        with self.db.session() as s:
            row = s.get(LtiPlatform, platform_id)
            return _platform(row) if row is not None else None

    def all(self) -> list[PlatformInfo]:
        with self.db.session() as s:
            return [_platform(r) for r in s.scalars(select(LtiPlatform).order_by(LtiPlatform.id))]

    def remove(self, issuer: str, client_id: str) -> bool:
        with self.db.session() as s:
            row = s.scalar(
                select(LtiPlatform).where(
                    LtiPlatform.issuer == issuer, LtiPlatform.client_id == client_id
                )
            )
            if row is None:
                return False
            s.delete(row)
            return True


@dataclass(frozen=True)
class ToolKey:
    kid: str
    private_pem: str
    public_pem: str
    public_jwk: dict[str, t.Any]


def tool_key(db: Database) -> ToolKey:
    """The tool's key pair: the newest stored, or a new RSA key made and stored now."""
    with db.session() as s:
        row = s.scalar(select(LtiToolKey).order_by(LtiToolKey.id.desc()).limit(1))
    if row is None:
        row = _new_key(db)
    private = serialization.load_pem_private_key(row.private_pem.encode(), password=None)
    public_pem = (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return ToolKey(row.kid, row.private_pem, public_pem, dict(row.public_jwk))


def _new_key(db: Database) -> LtiToolKey:
    private = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
    private_pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public_pem = (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    jwk = dict(Registration.get_jwk(public_pem))
    row = LtiToolKey(kid=str(jwk["kid"]), private_pem=private_pem, public_jwk=jwk)
    try:
        with db.session() as s:
            s.add(row)
    except IntegrityError:  # another process made one at the same moment
        with db.session() as s:
            found = s.scalar(select(LtiToolKey).order_by(LtiToolKey.id.desc()).limit(1))
        assert found is not None
        return found
    return row


def tool_jwks(db: Database) -> dict[str, list[dict[str, t.Any]]]:
    """The tool's public keys, as /lti/jwks serves them."""
    return {"keys": [tool_key(db).public_jwk]}


def registration(platform: PlatformInfo, key: ToolKey) -> Registration:
    return (
        Registration()
        .set_issuer(platform.issuer)
        .set_client_id(platform.client_id)
        .set_auth_login_url(platform.auth_login_url)
        .set_auth_token_url(platform.auth_token_url)
        .set_key_set_url(platform.key_set_url)
        .set_tool_private_key(key.private_pem)
        .set_tool_public_key(key.public_pem)
    )
