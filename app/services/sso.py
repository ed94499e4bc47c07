"""Single sign-on through OpenID Connect: the providers the admin registered, and the account
an outside identity signs in as.

An identity is an issuer's subject (`sub`). Its first sign-in links it to an account: the one
with its e-mail address when the provider says that address is verified, else a new account
made from it. A provider that does not vouch for the address (`email_verified` not true) is
refused outright: linking on an address anyone can type into their profile at the provider
would hand them the account that owns it. Later sign-ins go by the link alone.

The OAuth part (authorization code with PKCE, state and nonce, the ID token's signature,
issuer, audience, expiry and nonce) is authlib's Starlette client; this module only chooses
its settings and decides what the verified claims mean here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from kplay.app.db.models import User
from kplay.app.db.session import Database
from kplay.app.db.ssomodels import OidcProvider, SsoIdentity
from kplay.app.services.accounts import AccountError, check_email, check_name, check_role

NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
SCOPE = "openid email profile"
# No password matches it (not an Argon2 hash): an account made by single sign-on has no
# password until its owner sets one.
NO_PASSWORD = "!sso"
DISCOVERY = "/.well-known/openid-configuration"


class SsoError(ValueError):
    """A sign-in or a registration refused; the message says why, in words."""


@dataclass(frozen=True)
class ProviderInfo:
    name: str
    issuer: str
    client_id: str
    client_secret: str
    scope: str

    @property
    def metadata_url(self) -> str:
        return self.issuer.rstrip("/") + DISCOVERY


def check_url(url: str, what: str) -> str:
    """An absolute http(s) URL; https is expected, http is allowed for a local test server."""
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.netloc or any(c.isspace() for c in url):
        raise SsoError(f"{what} must be an absolute https:// URL, not {url[:80]!r}")
    return url


def check_provider_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise SsoError(
            f"a provider name is 1 to 40 lower-case letters, digits and dashes, not {name[:60]!r}"
        )
    return name


class OidcProviders:
    """The OpenID providers, on the app's database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, name: str, issuer: str, client_id: str, client_secret: str) -> ProviderInfo:
        name = check_provider_name(name)
        issuer = check_url(issuer, "the issuer")
        if not client_id.strip() or not client_secret.strip():
            raise SsoError("give the client id and client secret the provider issued")
        row = OidcProvider(
            name=name,
            issuer=issuer,
            client_id=client_id.strip(),
            client_secret=client_secret.strip(),
            scope=SCOPE,
        )
        try:
            with self.db.session() as s:
                s.add(row)
        except IntegrityError:
            raise SsoError(f"a provider named {name!r} exists; remove it first") from None
        return _info(row)

    def remove(self, name: str) -> bool:
        with self.db.session() as s:
            return bool(s.execute(delete(OidcProvider).where(OidcProvider.name == name)).rowcount)

    def get(self, name: str) -> ProviderInfo | None:
        with self.db.session() as s:
            row = s.scalar(select(OidcProvider).where(OidcProvider.name == name))
            return _info(row) if row is not None else None

    def all(self) -> list[ProviderInfo]:
        with self.db.session() as s:
            return [_info(r) for r in s.scalars(select(OidcProvider).order_by(OidcProvider.name))]


def _info(row: OidcProvider) -> ProviderInfo:
    return ProviderInfo(row.name, row.issuer, row.client_id, row.client_secret, row.scope)


# ---------------------------------------------------------------- identities and accounts


def _make_account(db: Database, email: str, name: str, role: str) -> User:
    user = User(
        email=check_email(email),
        password_hash=NO_PASSWORD,
        display_name=check_name(name or email.split("@")[0]),
        role=check_role(role),
    )
    with db.session() as s:
        s.add(user)
    return user


def linked(db: Database, source: str, subject: str) -> User | None:
    """The account `subject` of `source` was linked to, if it was."""
    with db.session() as s:
        link = s.scalar(
            select(SsoIdentity).where(SsoIdentity.source == source, SsoIdentity.subject == subject)
        )
        return s.get(User, link.user_id) if link is not None else None


def account_for(
    db: Database,
    source: str,
    subject: str,
    email: str | None,
    email_verified: bool,
    name: str = "",
    role: str = "learner",
) -> tuple[User, bool]:
    """The account `subject` of `source` signs in as, and whether it was made just now.

    Linked before: that account. Else, only with a verified address: the account that has
    it (linked now), or a new one. Raises SsoError when the address is missing or unverified.
    """
    if not subject or len(subject) > 255:
        raise SsoError("the identity carries no usable subject ('sub')")
    user = linked(db, source, subject)
    if user is not None:
        return user, False
    if not email:
        raise SsoError("the provider sent no e-mail address; allow the 'email' scope there")
    if not email_verified:
        raise SsoError(
            f"the provider has not verified the e-mail address {email[:80]}; verify it there "
            "first (an unverified address never signs in to an account here)"
        )
    from kplay.app.services.accounts import Accounts

    made = False
    user = Accounts(db).by_email(email)
    if user is None:
        try:
            user = _make_account(db, email, name, role)
            made = True
        except AccountError as exc:
            raise SsoError(f"cannot make an account from this identity: {exc.message}") from None
        except IntegrityError:  # the same address signed up at the same moment
            user = Accounts(db).by_email(email)
            if user is None:
                raise
    try:
        with db.session() as s:
            s.add(SsoIdentity(source=source, subject=subject, user_id=user.id))
    except IntegrityError:  # a second callback of the same identity at once: it linked
        pass
    return user, made


def oidc_account(db: Database, provider: ProviderInfo, claims: dict[str, Any]) -> User:
    """The account an ID token's verified claims sign in as."""
    verified = claims.get("email_verified") is True or claims.get("email_verified") == "true"
    name = str(claims.get("name") or claims.get("preferred_username") or "")
    user, _ = account_for(
        db,
        "oidc:" + provider.issuer,
        str(claims.get("sub") or ""),
        str(claims["email"]) if claims.get("email") else None,
        verified,
        name=name,
    )
    return user
