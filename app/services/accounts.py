"""Accounts: sign-up, log-in, profile, the runs a reader brings along, and API tokens.

An account's runs are stored under `acct:<id>` in `runs.user`, a string like an anonymous
reader's name, so nothing that stores, lists or counts runs by owner needs to know accounts
exist. Passwords are hashed with Argon2id (argon2-cffi); an API token is shown once and only
its SHA-256 is kept (a token is 256 random bits, so a fast hash is enough).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError

from kplay.app.db.models import ApiToken, Run, User, utcnow
from kplay.app.db.session import Database
from kplay.app.services.access import ROLES, Viewer

MIN_PASSWORD = 10
MAX_PASSWORD = 1024
MAX_EMAIL = 254
MAX_NAME = 80
MAX_TOKEN_NAME = 80
TOKEN_PREFIX = "kp_"
TOKEN_BYTES = 32
# A plausible address: something, one @, a domain with a dot; no spaces. Whether it receives
# mail is not checked (nothing is ever sent to it).
EMAIL = re.compile(r"[^@\s]+@[^@\s.]+(\.[^@\s.]+)+")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")

_hasher = PasswordHasher()
# Verified when no account has the e-mail, so a wrong e-mail takes as long as a wrong password.
_DUMMY_HASH = _hasher.hash(secrets.token_urlsafe(16))


class AccountError(ValueError):
    """Input refused; `field` names the form field it is about, `message` says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def owner_key(user_id: int) -> str:
    """The name an account's runs are stored under."""
    return f"acct:{user_id}"


def viewer_of(user: User) -> Viewer:
    return Viewer(owner_key(user.id), user.id, user.role, user.email, user.display_name)


def check_email(email: str) -> str:
    email = email.strip()
    if not email:
        raise AccountError("email", "enter your e-mail address")
    if len(email) > MAX_EMAIL or CONTROL.search(email) or not EMAIL.fullmatch(email):
        raise AccountError("email", f"{email[:60]!r} is not an e-mail address (name@example.org)")
    return email


def check_password(password: str) -> str:
    if len(password) < MIN_PASSWORD:
        raise AccountError(
            "password", f"the password is too short: use at least {MIN_PASSWORD} characters"
        )
    if len(password) > MAX_PASSWORD:
        raise AccountError("password", f"the password is longer than {MAX_PASSWORD} characters")
    return password


def check_name(name: str, field: str = "display_name", limit: int = MAX_NAME) -> str:
    name = " ".join(name.split())
    if not name:
        raise AccountError(field, "enter a name")
    if len(name) > limit or CONTROL.search(name):
        raise AccountError(field, f"a name is at most {limit} printable characters")
    return name


def check_role(role: str) -> str:
    if role not in ROLES:
        raise AccountError("role", f"unknown role {role!r}; one of {', '.join(ROLES)}")
    return role


def public_name(user: User) -> str | None:
    """The name a public board may show for the account: None when its owner hides it."""
    return None if user.hide_name else user.display_name


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class TokenInfo:
    id: int
    name: str
    created_at: str
    last_used_at: str | None


class Accounts:
    """Every account operation, on the app's database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # ---------------------------------------------------------------- accounts

    def create(
        self, email: str, password: str, display_name: str = "", role: str = "learner"
    ) -> User:
        email = check_email(email)
        check_password(password)
        name = check_name(display_name or email.split("@")[0])
        check_role(role)
        user = User(email=email, password_hash=_hasher.hash(password), display_name=name, role=role)
        taken = AccountError("email", "an account with this e-mail address already exists")
        if self.by_email(email) is not None:
            raise taken
        try:
            with self.db.session() as s:
                s.add(user)
        except IntegrityError:  # two sign-ups with one address at once: the index decides
            raise taken from None
        return user

    def by_email(self, email: str) -> User | None:
        stmt = select(User).where(func.lower(User.email) == email.strip().lower())
        with self.db.session() as s:
            return s.scalar(stmt)

    def get(self, user_id: int) -> User | None:
        with self.db.session() as s:
            return s.get(User, user_id)

    def authenticate(self, email: str, password: str) -> User | None:
        """The account when e-mail and password match; None otherwise, whichever was wrong."""
        plausible = len(email) <= MAX_EMAIL and not CONTROL.search(email)
        user = self.by_email(email) if plausible else None
        if len(password) > MAX_PASSWORD:
            return None
        try:
            _hasher.verify(user.password_hash if user else _DUMMY_HASH, password)
        except (VerificationError, InvalidHashError):
            return None
        if user is None:
            return None
        if _hasher.check_needs_rehash(user.password_hash):
            self._set(user.id, password_hash=_hasher.hash(password))
        return user

    def set_password(self, user_id: int, password: str) -> None:
        self._set(user_id, password_hash=_hasher.hash(check_password(password)))

    def update_profile(self, user_id: int, display_name: str, hide_name: bool) -> User:
        self._set(user_id, display_name=check_name(display_name), hide_name=hide_name)
        user = self.get(user_id)
        assert user is not None
        return user

    def set_role(self, user_id: int, role: str) -> None:
        self._set(user_id, role=check_role(role))

    def _set(self, user_id: int, **values: object) -> None:
        with self.db.session() as s:
            s.execute(update(User).where(User.id == user_id).values(**values))

    def claim_runs(self, reader_owner: str, user_id: int) -> int:
        """Move an anonymous reader's runs to the account, in one UPDATE; how many moved."""
        from kplay.app.services.dashboard_cells import refresh_owners

        stmt = update(Run).where(Run.user == reader_owner).values(user=owner_key(user_id))
        with self.db.session() as s:
            moved = int(s.execute(stmt).rowcount or 0)
            if moved:  # the dashboard's rows of both owners, in the same transaction
                refresh_owners(s, [reader_owner, owner_key(user_id)])
            return moved

    # ---------------------------------------------------------------- API tokens

    def create_token(self, user_id: int, name: str) -> tuple[TokenInfo, str]:
        """A new token of the account: its description, and the token itself (shown once)."""
        name = check_name(name, field="token_name", limit=MAX_TOKEN_NAME)
        token = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
        row = ApiToken(user_id=user_id, name=name, token_hash=token_hash(token))
        with self.db.session() as s:
            s.add(row)
        return _info(row), token

    def tokens(self, user_id: int) -> list[TokenInfo]:
        stmt = select(ApiToken).where(ApiToken.user_id == user_id).order_by(ApiToken.id)
        with self.db.session() as s:
            return [_info(t) for t in s.scalars(stmt)]

    def revoke_token(self, user_id: int, token_id: int) -> bool:
        """Delete one of the account's tokens; False when it has none of that id."""
        stmt = delete(ApiToken).where(ApiToken.id == token_id, ApiToken.user_id == user_id)
        with self.db.session() as s:
            return bool(s.execute(stmt).rowcount)

    def user_for_token(self, token: str) -> User | None:
        """The account a token acts as; None for a token that is unknown or revoked."""
        if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
            return None
        with self.db.session() as s:
            row = s.scalar(select(ApiToken).where(ApiToken.token_hash == token_hash(token)))
            if row is None:
                return None
            row.last_used_at = utcnow()
            return s.get(User, row.user_id)


def _info(row: ApiToken) -> TokenInfo:
    used = row.last_used_at
    return TokenInfo(
        id=row.id,
        name=row.name,
        created_at=row.created_at.strftime("%Y-%m-%d %H:%M UTC"),
        last_used_at=used.strftime("%Y-%m-%d %H:%M UTC") if used else None,
    )
