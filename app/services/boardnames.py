"""The names a public page (a leaderboard) shows for the owners of runs: the one place that
decides them.

An owner is what `runs.user` holds: `acct:<id>` for an account, a random reader id for an
anonymous reader. A raw owner is never shown: it is the key to that reader's runs.

- An account shows its display name, unless its owner chose to hide it.
- Everyone else (an anonymous reader, a hidden or deleted account) shows a neutral label,
  "reader 3f9a0c": a keyed hash of the owner, the same on every page and every day, from
  which the owner cannot be worked back without the app's secret key.

A rule to come (a cohort's own names, say) is a change to `public_names` alone.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable

from sqlalchemy import select

from kplay.app.db.models import User
from kplay.app.db.session import Database
from kplay.app.services.accounts import public_name

ACCOUNT_PREFIX = "acct:"
LABEL_HEX = 6
_DERIVE = b"kplay.board-names"


def names_key(secret: str) -> bytes:
    """The labels' own key, derived from the app's secret so it is never the session key."""
    return hmac.new(secret.encode(), _DERIVE, hashlib.sha256).digest()


def neutral_label(key: bytes, owner: str) -> str:
    digest = hmac.new(key, owner.encode(), hashlib.sha256).hexdigest()
    return f"reader {digest[:LABEL_HEX]}"


def _account_id(owner: str) -> int | None:
    if not owner.startswith(ACCOUNT_PREFIX):
        return None
    rest = owner[len(ACCOUNT_PREFIX) :]
    return int(rest) if rest.isdigit() else None


def public_names(db: Database, owners: Iterable[str], key: bytes) -> dict[str, str]:
    """owner -> the name to show, for every owner given (one query for the accounts)."""
    wanted = list(dict.fromkeys(owners))
    names = {owner: neutral_label(key, owner) for owner in wanted}
    ids = {owner: i for owner in wanted if (i := _account_id(owner)) is not None}
    if ids:
        with db.session() as s:
            users = {u.id: u for u in s.scalars(select(User).where(User.id.in_(ids.values())))}
        for owner, user_id in ids.items():
            user = users.get(user_id)
            shown = public_name(user) if user is not None else None
            if shown:
                names[owner] = shown
    return names
