"""Single sign-on models (migration 0009): OpenID Connect providers, LTI 1.3 platforms, the
tool's own key pair, the outside identities linked to accounts, and the LMS grade columns a
launch named for a (user, exercise).

They share the metadata of app/db/models.py. The admin manages providers and platforms with
`kplay admin` (kplay/ssocli.py); nothing here is a setting.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from kplay.app.db.models import Base, UTCDateTime, utcnow


class OidcProvider(Base):
    """An OpenID provider the login page offers ("Sign in with <name>")."""

    __tablename__ = "oidc_providers"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(40), unique=True)
    issuer: Mapped[str] = mapped_column(String(500))
    client_id: Mapped[str] = mapped_column(String(255))
    client_secret: Mapped[str] = mapped_column(String(500))
    scope: Mapped[str] = mapped_column(String(200), default="openid email profile")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class SsoIdentity(Base):
    """An outside identity (an OpenID subject, an LTI user) that signs in as an account.

    `source` is "oidc:<issuer>" or "lti:<issuer>": a subject is unique only at its issuer.
    """

    __tablename__ = "sso_identities"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    source: Mapped[str] = mapped_column(String(520))
    subject: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (UniqueConstraint("source", "subject", name="uq_sso_identity"),)


class LtiPlatform(Base):
    """An LMS registered as an LTI 1.3 platform: where its logins, tokens and keys are."""

    __tablename__ = "lti_platforms"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    issuer: Mapped[str] = mapped_column(String(500))
    client_id: Mapped[str] = mapped_column(String(255))
    auth_login_url: Mapped[str] = mapped_column(String(500))
    auth_token_url: Mapped[str] = mapped_column(String(500))
    key_set_url: Mapped[str] = mapped_column(String(500))
    deployment_ids: Mapped[list[str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (UniqueConstraint("issuer", "client_id", name="uq_lti_platform"),)


class LtiToolKey(Base):
    """The tool's RSA key pair: it signs the tool's token requests to a platform; the public
    half is served at /lti/jwks. The private key never leaves the database."""

    __tablename__ = "lti_tool_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kid: Mapped[str] = mapped_column(String(64), unique=True)
    private_pem: Mapped[str] = mapped_column(Text)
    public_jwk: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class LtiGradeLink(Base):
    """The LMS grade column (an AGS line item) a launch named for a user's exercise."""

    __tablename__ = "lti_grade_links"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    exercise: Mapped[str] = mapped_column(String(200))
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id", ondelete="CASCADE"))
    lti_user: Mapped[str] = mapped_column(String(255))
    lineitem: Mapped[str] = mapped_column(String(1000))
    # The launch's AGS claim as sent (scopes, line item URLs): what pylti1p3's service needs.
    ags: Mapped[dict[str, Any]] = mapped_column(JSON)
    last_posted: Mapped[float | None] = mapped_column(Float, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (UniqueConstraint("user_id", "exercise", name="uq_lti_grade_link"),)
