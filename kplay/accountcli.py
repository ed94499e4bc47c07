"""`kplay login`, `kplay whoami` and `kplay admin create-user`: accounts from the terminal.

`kplay login --server URL` trades an e-mail and password for an API token (or checks the
`--token` given) and keeps it in `credentials.json` in the user's config folder, mode 0600,
one token per server. `kplay admin create-user` writes an account straight into the
configured database (`KPLAY_DATABASE_URL`), for the first admin and for instructors.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import secrets
import socket
import sys
from pathlib import Path
from typing import Any

from platformdirs import user_config_dir

from kplay.configdefaults import APP_DIR_NAME

EXIT_BAD_INPUT, EXIT_REFUSED = 2, 1
CREDENTIALS = "credentials.json"


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> int:
    print(f"kplay: error: {message}", file=sys.stderr)
    return code


def credentials_path() -> Path:
    return Path(user_config_dir(APP_DIR_NAME)) / CREDENTIALS


def load_credentials() -> dict[str, str]:
    """Server URL -> token, as `kplay login` kept them; empty when there are none."""
    path = credentials_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    servers = data.get("servers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        return {}
    return {str(k): str(v) for k, v in servers.items() if isinstance(v, str)}


def stored_token(server: str) -> str | None:
    """The token `kplay login` kept for `server`; what a remote command sends as its bearer."""
    return load_credentials().get(_base(server))


def save_token(server: str, token: str) -> Path:
    """Keep `token` for `server`: written to a private temporary file (0600) then renamed,
    so the file is never readable by others, not even half written."""
    path = credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    servers = load_credentials()
    servers[_base(server)] = token
    temp = path.with_name(f".{CREDENTIALS}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump({"servers": servers}, out, indent=2)
    os.replace(temp, path)
    os.chmod(path, 0o600)
    return path


def _base(server: str) -> str:
    return server.rstrip("/")


def _call(method: str, url: str, token: str | None = None, body: Any = None) -> tuple[int, Any]:
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        reply = httpx.request(method, url, json=body, headers=headers, timeout=30)
    except httpx.HTTPError as exc:
        raise ConnectionError(f"cannot reach {url}: {exc}") from None
    try:
        data = reply.json()
    except ValueError:
        data = {"detail": reply.text[:200]}
    return reply.status_code, data


def _account(server: str, token: str) -> tuple[int, Any]:
    return _call("GET", f"{_base(server)}/api/v1/account", token)


def cmd_login(args: argparse.Namespace) -> int:
    server = _base(args.server)
    try:
        if args.token:
            token = args.token.strip()
        else:
            email = args.email or input("E-mail: ").strip()
            password = sys.stdin.readline().rstrip("\n") if args.password_stdin else None
            if password is None:
                password = getpass.getpass("Password: ")
            name = f"kplay CLI on {socket.gethostname()}"[:80]
            body = {"email": email, "password": password, "name": name}
            status, data = _call("POST", f"{server}/api/v1/tokens", body=body)
            if status != 201:
                return _fail(f"{server} refused the log-in: {data.get('detail')}", EXIT_REFUSED)
            token = str(data["token"])
        status, who = _account(server, token)
    except ConnectionError as exc:
        return _fail(str(exc), EXIT_REFUSED)
    if status != 200 or not who.get("signed_in"):
        return _fail(f"{server} does not accept this token: {who.get('detail')}", EXIT_REFUSED)
    path = save_token(server, token)
    print(f"logged in to {server} as {who['email']} ({who['role']}); token kept in {path}")
    return 0


def cmd_whoami(args: argparse.Namespace) -> int:
    server = _base(args.server)
    token = stored_token(server)
    if token is None:
        return _fail(f"not logged in to {server}: run `kplay login --server {server}`")
    try:
        status, who = _account(server, token)
    except ConnectionError as exc:
        return _fail(str(exc), EXIT_REFUSED)
    if status != 200:
        return _fail(f"{server}: {who.get('detail')}", EXIT_REFUSED)
    print(f"{who['email']} ({who['role']}) on {server}")
    return 0


def cmd_create_user(args: argparse.Namespace) -> int:
    from kplay.app.db.migrate import upgrade
    from kplay.app.db.session import Database
    from kplay.app.services.accounts import AccountError, Accounts
    from kplay.config import Settings

    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass.getpass("Password: ")
        if getpass.getpass("Again: ") != password:
            return _fail("the two passwords differ")
    settings = Settings()
    db = Database(settings.database_url)
    try:
        upgrade(db.engine)
        user = Accounts(db).create(args.email, password, args.name or "", args.role)
    except AccountError as exc:
        return _fail(f"{exc.field}: {exc.message}")
    finally:
        db.dispose()
    print(f"made {user.role} {user.email} (account {user.id})")
    return 0


def add_parsers(sub: Any) -> None:
    """The account commands, on `kplay`'s subcommand parser."""
    login = sub.add_parser("login", help="log in to a Kernel Playground server; keep its token")
    login.add_argument("--server", required=True, metavar="URL", help="e.g. http://host:8000")
    login.add_argument("--token", help="an API token made on the account page (no password)")
    login.add_argument("--email", help="the account's e-mail (asked when not given)")
    login.add_argument(
        "--password-stdin", action="store_true", help="read the password from standard input"
    )
    login.set_defaults(func=cmd_login)
    whoami = sub.add_parser("whoami", help="the account the kept token of a server acts as")
    whoami.add_argument("--server", required=True, metavar="URL")
    whoami.set_defaults(func=cmd_whoami)
    admin = sub.add_parser("admin", help="administer the configured database")
    admin_sub = admin.add_subparsers(dest="admin_command", required=True)
    create = admin_sub.add_parser("create-user", help="make an account")
    create.add_argument("email")
    create.add_argument("--role", choices=["learner", "instructor", "admin"], default="learner")
    create.add_argument("--name", help="display name (default: the e-mail before the @)")
    create.add_argument(
        "--password-stdin", action="store_true", help="read the password from standard input"
    )
    create.set_defaults(func=cmd_create_user)
    from kplay.ssocli import add_admin_parsers

    add_admin_parsers(admin_sub)  # add-oidc, add-lti-platform, ...
