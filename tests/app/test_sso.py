"""Single sign-on through OpenID Connect, against a real OpenID provider served on a local
port (tests/app/sso_servers.py): the provider registered with `kplay admin add-oidc`, the
log-in page's link, the full authorization-code round trip through authlib, and each way a
sign-in is refused (a forged state, a replayed nonce, another client's token, an unverified
address)."""

from __future__ import annotations

import html
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from kplay.app.db.models import Run, User
from kplay.app.db.ssomodels import SsoIdentity
from kplay.app.services.accounts import Accounts
from kplay.cli import main
from tests.app.sso_servers import OpenIdProvider, running_provider
from tests.app.test_accounts import GOOD, PASSWORD

ERROR = "sign-in with 'acme' refused"


@pytest.fixture
def provider(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[OpenIdProvider]:
    """A running provider, registered in the app's database through the admin command."""
    monkeypatch.setenv("KPLAY_DATABASE_URL", sqlite_url)
    with running_provider() as op:
        op.user = {
            "sub": "op-user-1",
            "email": "ada@example.org",
            "email_verified": True,
            "name": "Ada L",
        }
        argv = ["admin", "add-oidc", "--name", "acme", "--issuer", op.issuer]
        argv += ["--client-id", op.client_id, f"--client-secret={op.client_secret}"]
        assert main(argv) == 0
        yield op


def start(client: TestClient, next: str = "") -> str:
    """Follow the sign-in to the provider and back; the callback path the provider gave."""
    login = "/sso/acme/login" + (f"?next={next}" if next else "")
    reply = client.get(login, follow_redirects=False)
    assert reply.status_code == 302, reply.text
    to_provider = reply.headers["location"]
    query = parse_qs(urlsplit(to_provider).query)
    assert query["code_challenge_method"] == ["S256"] and query["code_challenge"]
    assert query["nonce"] and query["state"] and "openid" in query["scope"][0].split()
    back = httpx.get(to_provider, follow_redirects=False, timeout=10)
    assert back.status_code == 302, back.text
    parts = urlsplit(back.headers["location"])
    assert parts.path == "/sso/acme/callback"
    return f"{parts.path}?{parts.query}"


def said(reply: httpx.Response) -> str:
    return html.unescape(reply.text)


def me(client: TestClient) -> dict[str, object]:
    return dict(client.get("/api/v1/account").json())


def test_the_login_page_offers_the_provider(provider: OpenIdProvider, client: TestClient) -> None:
    html = client.get("/login?next=/book/ch01").text
    assert 'href="/sso/acme/login?next=/book/ch01"' in html
    assert "Sign in with acme" in html
    assert client.get("/sso/nobody/login").status_code == 404


def test_sign_in_makes_the_account_moves_the_runs_and_signs_in(
    provider: OpenIdProvider, client: TestClient
) -> None:
    run_id = client.post("/api/v1/runs", json=GOOD).json()["id"]
    reply = client.get(start(client, next="/book/ch01"), follow_redirects=False)
    assert reply.status_code == 303, reply.text
    assert reply.headers["location"] == "/book/ch01"
    assert me(client) == {
        "signed_in": True,
        "email": "ada@example.org",
        "display_name": "Ada L",
        "role": "learner",
    }
    db = client.app.state.services.db  # type: ignore[attr-defined]
    with db.session() as s:
        user = s.scalar(select(User).where(User.email == "ada@example.org"))
        assert s.scalar(select(Run.user).where(Run.id == run_id)) == f"acct:{user.id}"
        link = s.scalar(select(SsoIdentity))
        assert (link.source, link.subject, link.user_id) == (
            f"oidc:{provider.issuer}",
            "op-user-1",
            user.id,
        )
    # No password signs in to an account made this way.
    assert Accounts(db).authenticate("ada@example.org", "!sso") is None
    # The second sign-in goes by the link, even after the address changes at the provider.
    client.post("/logout", data={"csrf": _csrf(client)})
    assert me(client)["signed_in"] is False
    provider.user["email"] = "ada.new@example.org"
    assert client.get(start(client), follow_redirects=False).status_code == 303
    assert me(client)["email"] == "ada@example.org"


def _csrf(client: TestClient) -> str:
    from tests.app.test_accounts import csrf_of

    return csrf_of(client, "/account")


def test_a_verified_address_signs_in_to_the_existing_account(
    provider: OpenIdProvider, client: TestClient
) -> None:
    db = client.app.state.services.db  # type: ignore[attr-defined]
    made = Accounts(db).create("Ada@Example.org", PASSWORD, "Ada", "instructor")
    assert client.get(start(client), follow_redirects=False).status_code == 303
    assert me(client)["email"] == "Ada@Example.org" and me(client)["role"] == "instructor"
    with db.session() as s:
        assert s.scalar(select(SsoIdentity.user_id)) == made.id


def test_an_unverified_address_is_refused_and_links_nothing(
    provider: OpenIdProvider, client: TestClient
) -> None:
    db = client.app.state.services.db  # type: ignore[attr-defined]
    Accounts(db).create("ada@example.org", PASSWORD, "Ada")
    provider.user["email_verified"] = False
    reply = client.get(start(client))
    assert reply.status_code == 403
    assert ERROR in said(reply) and "has not verified the e-mail address" in said(reply)
    assert me(client)["signed_in"] is False
    with db.session() as s:
        assert s.scalar(select(SsoIdentity)) is None


def test_a_state_not_started_here_is_refused(provider: OpenIdProvider, client: TestClient) -> None:
    callback = start(client)
    forged = callback.replace("state=", "state=x")
    reply = client.get(forged)
    assert reply.status_code == 403
    assert "the state sent back does not match" in said(reply)
    assert provider.token_requests == 0  # refused before the code was spent
    # A callback in a browser that never started a sign-in is refused too.
    with TestClient(client.app) as other:
        stranger = other.get(callback)
    assert stranger.status_code == 400 and "not started in this browser" in said(stranger)
    assert me(client)["signed_in"] is False


def test_a_token_with_another_nonce_is_refused(
    provider: OpenIdProvider, client: TestClient
) -> None:
    provider.tamper = {"nonce": "a-nonce-of-another-sign-in"}
    reply = client.get(start(client))
    assert reply.status_code == 403
    assert "nonce is not the one this sign-in sent" in said(reply)
    assert me(client)["signed_in"] is False


def test_a_token_for_another_client_is_refused(
    provider: OpenIdProvider, client: TestClient
) -> None:
    provider.tamper = {"aud": "some-other-client"}
    reply = client.get(start(client))
    assert reply.status_code == 403
    assert "issued for another client" in said(reply)
    assert me(client)["signed_in"] is False


def test_add_oidc_refuses_bad_input(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KPLAY_DATABASE_URL", sqlite_url)
    base = ["admin", "add-oidc", "--client-id", "c", "--client-secret", "s"]
    assert main([*base, "--name", "Bad Name", "--issuer", "https://op.example"]) == 2
    assert "lower-case letters" in capsys.readouterr().err
    assert main([*base, "--name", "ok", "--issuer", "op.example"]) == 2
    assert "absolute https:// URL" in capsys.readouterr().err
    assert main([*base, "--name", "ok", "--issuer", "https://op.example"]) == 0
    assert main([*base, "--name", "ok", "--issuer", "https://op.example"]) == 2
    assert "exists" in capsys.readouterr().err
    assert main(["admin", "list-sso"]) == 0
    assert "oidc ok: https://op.example" in capsys.readouterr().out


def test_a_provider_that_does_not_answer_or_names_another_issuer(
    provider: OpenIdProvider, client: TestClient
) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    down = ["admin", "add-oidc", "--name", "down", "--issuer", f"http://127.0.0.1:{port}"]
    assert main([*down, "--client-id", "c", "--client-secret", "s"]) == 0
    reply = client.get("/sso/down/login", follow_redirects=False)
    assert reply.status_code == 502 and "does not answer" in said(reply)
    other = ["admin", "add-oidc", "--name", "alias", "--issuer", provider.issuer + "/realm"]
    assert main([*other, "--client-id", "c", "--client-secret", "s"]) == 0
    # The realm's discovery URL answers 404 at this provider: no configuration there.
    assert client.get("/sso/alias/login", follow_redirects=False).status_code == 502
    provider.claimed_issuer = "https://impostor.example"
    reply = client.get("/sso/acme/login", follow_redirects=False)
    assert reply.status_code == 502 and "calls itself 'https://impostor.example'" in said(reply)


def test_migration_0009_matches_the_models_and_goes_down(database_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import inspect

    from kplay.app.db.migrate import upgrade
    from kplay.app.db.models import Base
    from kplay.app.db.session import Database

    tables = {"oidc_providers", "sso_identities", "lti_platforms", "lti_tool_keys"}
    tables.add("lti_grade_links")
    db = Database(database_url)
    try:
        upgrade(db.engine)
        assert tables <= set(inspect(db.engine).get_table_names())
        with db.engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            found = compare_metadata(ctx, Base.metadata)
        diffs = [d for d in found if any(t in repr(d) for t in tables)]
        assert diffs == [], f"migration 0009 and app/db/ssomodels.py differ: {diffs}"
        upgrade_to(db, "0008_exercise_kinds")
        assert not tables & set(inspect(db.engine).get_table_names())
    finally:
        db.dispose()


def upgrade_to(db: object, revision: str) -> None:
    from alembic import command

    from kplay.app.db.migrate import alembic_config

    cfg = alembic_config()
    with db.engine.begin() as conn:  # type: ignore[attr-defined]
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)
