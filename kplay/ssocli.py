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
    from kplay.app.services.ltiplatforms import LtiPlatforms

    return [
        f"lti {p.issuer} (client {p.client_id}; deployments {', '.join(p.deployment_ids)})"
        for p in LtiPlatforms(db).all()
    ]


def cmd_add_lti_platform(args: argparse.Namespace) -> int:
    from kplay.app.services.ltiplatforms import LtiError, LtiPlatforms, tool_key

    with _database() as db:
        try:
            found = LtiPlatforms(db).add(
                args.issuer,
                args.client_id,
                args.auth_login_url,
                args.auth_token_url,
                args.key_set_url,
                args.deployment_id,
            )
        except LtiError as exc:
            return _fail(str(exc))
        key = tool_key(db)  # made now when there is none yet
    print(
        f"registered LTI platform {found.issuer} (client {found.client_id}; deployments "
        f"{', '.join(found.deployment_ids)}).\nGive the LMS these tool URLs: login "
        "<site>/lti/login, launch (redirect) <site>/lti/launch, keys <site>/lti/jwks "
        f"(key id {key.kid})."
    )
    return 0


def cmd_remove_lti_platform(args: argparse.Namespace) -> int:
    from kplay.app.services.ltiplatforms import LtiPlatforms

    with _database() as db:
        if not LtiPlatforms(db).remove(args.issuer, args.client_id):
            return _fail(
                f"no LTI platform is registered with issuer {args.issuer!r} and client id "
                f"{args.client_id!r}",
                EXIT_REFUSED,
            )
    print(f"removed LTI platform {args.issuer} (client {args.client_id})")
    return 0


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
    lti = add("add-lti-platform", help="let an LMS launch chapters over LTI 1.3 and take grades")
    lti.add_argument("--issuer", required=True, metavar="URL", help="the platform's issuer")
    lti.add_argument("--client-id", required=True, help="the client id the LMS gave the tool")
    lti.add_argument("--auth-login-url", required=True, metavar="URL", help="OIDC auth URL")
    lti.add_argument("--auth-token-url", required=True, metavar="URL", help="OAuth2 token URL")
    lti.add_argument("--key-set-url", required=True, metavar="URL", help="the platform's JWKS")
    lti.add_argument(
        "--deployment-id", required=True, action="append", help="a deployment id (repeatable)"
    )
    lti.set_defaults(func=cmd_add_lti_platform)
    unlti = add("remove-lti-platform", help="stop taking launches from an LMS")
    unlti.add_argument("--issuer", required=True, metavar="URL")
    unlti.add_argument("--client-id", required=True)
    unlti.set_defaults(func=cmd_remove_lti_platform)
