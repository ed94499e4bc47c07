"""`kplay admin` commands for single sign-on: OpenID providers and LTI 1.3 platforms.

They write straight into the configured database (`KPLAY_DATABASE_URL`), like
`kplay admin create-user`; a running app sees the change at its next request.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

EXIT_BAD_INPUT, EXIT_REFUSED = 2, 1


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> int:
    print(f"kplay: error: {message}", file=sys.stderr)
    return code


@contextmanager
def _database() -> Iterator[Any]:
    from kplay.app.db.migrate import upgrade
    from kplay.app.db.session import Database
    from kplay.config import Settings

    db = Database(Settings().database_url)
    try:
        upgrade(db.engine)
        yield db
    finally:
        db.dispose()


def cmd_add_oidc(args: argparse.Namespace) -> int:
    from kplay.app.services.sso import OidcProviders, SsoError

    secret = args.client_secret
    if args.client_secret_stdin:
        secret = sys.stdin.readline().strip()
    if not secret:
        return _fail("give the client secret: --client-secret S or --client-secret-stdin")
    with _database() as db:
        try:
            info = OidcProviders(db).add(args.name, args.issuer, args.client_id, secret)
        except SsoError as exc:
            return _fail(str(exc))
    print(
        f"added OpenID provider {info.name!r} ({info.issuer}); the log-in page now offers "
        f"'Sign in with {info.name}'. Register this redirect URI at the provider: "
        f"<site>/sso/{info.name}/callback"
    )
    return 0


def cmd_remove_oidc(args: argparse.Namespace) -> int:
    from kplay.app.services.sso import OidcProviders

    with _database() as db:
        if not OidcProviders(db).remove(args.name):
            return _fail(f"no OpenID provider is named {args.name!r}", EXIT_REFUSED)
    print(f"removed OpenID provider {args.name!r}; accounts it made keep working by password")
    return 0


def cmd_list_sso(args: argparse.Namespace) -> int:
    from kplay.app.services.sso import OidcProviders

    with _database() as db:
        providers = OidcProviders(db).all()
        lines = [f"oidc {p.name}: {p.issuer} (client {p.client_id})" for p in providers]
        lines += _lti_lines(db)
    print("\n".join(lines) if lines else "no OpenID provider and no LTI platform registered")
    return 0


def _lti_lines(db: Any) -> list[str]:
    return []


def add_admin_parsers(admin_sub: Any) -> None:
    """The single sign-on commands, on `kplay admin`'s subcommand parser."""
    add: Callable[..., Any] = admin_sub.add_parser
    oidc = add("add-oidc", help="offer 'Sign in with NAME' through an OpenID Connect provider")
    oidc.add_argument("--name", required=True, help="short name: lower-case letters, digits, -")
    oidc.add_argument("--issuer", required=True, metavar="URL", help="the provider's issuer URL")
    oidc.add_argument("--client-id", required=True, help="the client id the provider issued")
    oidc.add_argument("--client-secret", help="the client secret the provider issued")
    oidc.add_argument(
        "--client-secret-stdin", action="store_true", help="read the client secret from stdin"
    )
    oidc.set_defaults(func=cmd_add_oidc)
    remove = add("remove-oidc", help="stop offering an OpenID provider")
    remove.add_argument("name")
    remove.set_defaults(func=cmd_remove_oidc)
    listing = add("list-sso", help="the OpenID providers and LTI platforms registered")
    listing.set_defaults(func=cmd_list_sso)
