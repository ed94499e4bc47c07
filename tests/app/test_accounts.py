"""Accounts: the migration on SQLite and PostgreSQL, sign-up and log-in with their messages,
the form token, the log-in rate limit, the reader's runs following it into the account, the
account page and its API tokens."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import insert, inspect, select
from sqlalchemy.exc import IntegrityError

from kplay.app.db.migrate import upgrade
from kplay.app.db.models import ApiToken, Run, User, utcnow
from kplay.app.db.session import Database
from kplay.app.main import create_app
from kplay.app.services.accounts import AccountError, Accounts, owner_key, public_name
from kplay.config import Settings
from tests.app.fakes import FakeExecutor

GOOD = {
    "problem": "vector_add",
    "backend": "numba-cpu",
    "source": "import numba\n\n@numba.njit\ndef vector_add(a, b, out, n):\n    pass\n",
    "cell": "ch01-vadd-cpu",
}
PASSWORD = "correct horse battery"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')
ERROR = re.compile(r"data-account-error>([^<]*)<")


def csrf_of(client: TestClient, path: str = "/login") -> str:
    match = CSRF.search(client.get(path).text)
    assert match, f"{path} has no form token"
    return match.group(1)


def sign_up(client: TestClient, email: str, password: str = PASSWORD, **extra: str) -> object:
    data = {"email": email, "password": password, "csrf": csrf_of(client, "/signup"), **extra}
    return client.post("/signup", data=data, follow_redirects=False)


def log_in(client: TestClient, email: str, password: str = PASSWORD, **extra: str) -> object:
    data = {"email": email, "password": password, "csrf": csrf_of(client), **extra}
    return client.post("/login", data=data, follow_redirects=False)


def error_of(html: str) -> str:
    match = ERROR.search(html)
    assert match, "the page shows no error"
    return match.group(1).replace("&#39;", "'")


# ---------------------------------------------------------------- the database


def test_the_migration_makes_both_tables_and_emails_are_unique_in_any_case(
    database_url: str,
) -> None:
    db = Database(database_url)
    upgrade(db.engine)
    upgrade(db.engine)
    names = set(inspect(db.engine).get_table_names())
    assert {"users", "api_tokens", "runs"} <= names
    columns = {c["name"] for c in inspect(db.engine).get_columns("users")}
    assert {"email", "password_hash", "display_name", "role", "hide_name"} <= columns
    row = {"password_hash": "x", "display_name": "a", "role": "learner", "created_at": utcnow()}
    with db.session() as s:
        s.execute(insert(User).values(email="Ada@Example.org", **row))
    # The index itself refuses the same address in another case, whoever writes the row.
    with pytest.raises(IntegrityError), db.session() as s:
        s.execute(insert(User).values(email="ada@example.ORG", **row))
    db.dispose()


def test_accounts_service_on_both_databases(database_url: str) -> None:
    db = Database(database_url)
    upgrade(db.engine)
    accounts = Accounts(db)
    user = accounts.create("Grace@Example.org", PASSWORD, "Grace")
    assert user.role == "learner" and user.password_hash.startswith("$argon2id$")
    assert PASSWORD not in user.password_hash
    with pytest.raises(AccountError, match="already exists"):
        accounts.create("grace@example.ORG", PASSWORD)
    assert accounts.authenticate("GRACE@example.org", PASSWORD) is not None
    assert accounts.authenticate("grace@example.org", PASSWORD + "!") is None
    assert accounts.authenticate("nobody@example.org", PASSWORD) is None
    assert accounts.authenticate("nul\x00@example.org", PASSWORD) is None
    info, token = accounts.create_token(user.id, "laptop")
    found = accounts.user_for_token(token)
    assert found is not None and found.id == user.id
    assert accounts.tokens(user.id)[0].last_used_at is not None
    assert accounts.revoke_token(user.id + 1, info.id) is False  # not another account's
    assert accounts.revoke_token(user.id, info.id) is True
    assert accounts.user_for_token(token) is None
    with db.session() as s:
        s.add(Run(id="b" * 32, user="anonymous-" + "c" * 32, problem="p", backend="b", source=""))
    assert accounts.claim_runs("anonymous-" + "c" * 32, user.id) == 1
    with db.session() as s:
        assert s.scalar(select(Run.user).where(Run.id == "b" * 32)) == owner_key(user.id)
    db.dispose()


@pytest.mark.parametrize(
    ("email", "password", "name", "field", "says"),
    [
        ("", PASSWORD, "", "email", "enter your e-mail"),
        ("not-an-address", PASSWORD, "", "email", "is not an e-mail address"),
        ("a@b", PASSWORD, "", "email", "is not an e-mail address"),
        ("a b@example.org", PASSWORD, "", "email", "is not an e-mail address"),
        ("a@example.org", "short", "", "password", "at least 10 characters"),
        ("a@example.org", PASSWORD, "x" * 81, "display_name", "at most 80"),
    ],
)
def test_bad_sign_up_input_is_named(
    make_settings: Callable[..., Settings],
    email: str,
    password: str,
    name: str,
    field: str,
    says: str,
) -> None:
    with TestClient(create_app(make_settings(), FakeExecutor())) as client:
        reply = sign_up(client, email, password, display_name=name)
        assert reply.status_code == 422  # type: ignore[attr-defined]
        html = reply.text  # type: ignore[attr-defined]
        assert says in error_of(html)
        assert f'id="account-{field}"' in html and 'aria-invalid="true"' in html
        assert client.get("/api/v1/account").json()["signed_in"] is False


# ---------------------------------------------------------------- the pages


def test_sign_up_moves_the_readers_runs_and_signs_in(client: TestClient) -> None:
    run_id = client.post("/api/v1/runs", json=GOOD).json()["id"]
    reader_cookie = client.cookies.get("kplay_session")
    reply = sign_up(client, "Lin@Example.org", display_name="Lin", next="/book/ch01")
    assert reply.status_code == 303 and reply.headers["location"] == "/book/ch01"  # type: ignore[attr-defined]
    assert client.cookies.get("kplay_session") != reader_cookie  # a new session
    me = client.get("/api/v1/account").json()
    assert me == {
        "signed_in": True,
        "email": "Lin@Example.org",
        "display_name": "Lin",
        "role": "learner",
    }
    assert client.get(f"/api/v1/runs/{run_id}").status_code == 200
    assert [r["id"] for r in client.get("/api/v1/cells/ch01-vadd-cpu/runs").json()] == [run_id]
    db = client.app.state.services.db  # type: ignore[attr-defined]
    with db.session() as s:
        assert s.scalar(select(Run.user).where(Run.id == run_id)).startswith("acct:")
    # A run started now is the account's too.
    second = client.post("/api/v1/runs", json=GOOD).json()["id"]
    with db.session() as s:
        owners = set(s.scalars(select(Run.user).where(Run.id.in_([run_id, second]))))
    assert len(owners) == 1
    assert 'data-nav-account title="Lin">Lin<' in client.get("/").text


def test_log_out_hides_the_history_and_log_in_brings_it_back(client: TestClient) -> None:
    sign_up(client, "kim@example.org")
    run_id = client.post("/api/v1/runs", json=GOOD).json()["id"]
    out = client.post("/logout", data={"csrf": csrf_of(client, "/account")}, follow_redirects=False)
    assert out.status_code == 303
    assert client.get("/api/v1/account").json()["signed_in"] is False
    assert client.get(f"/api/v1/runs/{run_id}").status_code == 404
    assert client.get("/api/v1/cells/ch01-vadd-cpu/runs").json() == []
    assert "data-nav-login" in client.get("/").text
    # Anonymous runs made after log-out join the account at the next log-in.
    later = client.post("/api/v1/runs", json=GOOD).json()["id"]
    assert log_in(client, "KIM@example.org").status_code == 303  # type: ignore[attr-defined]
    listed = [r["id"] for r in client.get("/api/v1/cells/ch01-vadd-cpu/runs").json()]
    assert sorted(listed) == sorted([run_id, later])


def test_wrong_email_and_wrong_password_read_the_same(client: TestClient) -> None:
    sign_up(client, "sam@example.org")
    client.post("/logout", data={"csrf": csrf_of(client, "/account")})
    wrong_password = log_in(client, "sam@example.org", "not the password")
    no_such_email = log_in(client, "nobody@example.org", PASSWORD)
    assert wrong_password.status_code == no_such_email.status_code == 401  # type: ignore[attr-defined]
    assert error_of(wrong_password.text) == error_of(no_such_email.text)  # type: ignore[attr-defined]
    assert "wrong" in error_of(no_such_email.text)  # type: ignore[attr-defined]


def test_a_taken_email_is_said_at_sign_up(client: TestClient) -> None:
    sign_up(client, "ana@example.org")
    with TestClient(client.app) as other:
        reply = sign_up(other, "ANA@example.org")
    assert reply.status_code == 422  # type: ignore[attr-defined]
    assert "already exists" in error_of(reply.text)  # type: ignore[attr-defined]


def test_forms_without_this_sessions_token_are_refused(client: TestClient) -> None:
    plain = {"email": "eve@example.org", "password": PASSWORD}
    assert client.post("/signup", data=plain).status_code == 403
    assert client.post("/signup", data={**plain, "csrf": "made-up"}).status_code == 403
    with TestClient(client.app) as other:
        foreign = csrf_of(other, "/signup")  # another session's token
    assert client.post("/signup", data={**plain, "csrf": foreign}).status_code == 403
    token = csrf_of(client, "/signup")
    cross = client.post(
        "/signup", data={**plain, "csrf": token}, headers={"Sec-Fetch-Site": "cross-site"}
    )
    assert cross.status_code == 403
    assert client.get("/api/v1/account").json()["signed_in"] is False
    assert client.post("/signup", data={**plain, "csrf": token}).status_code == 200


def test_only_local_paths_are_followed_after_log_in(client: TestClient) -> None:
    for target in ("https://elsewhere.example/", "//elsewhere.example/", "/\\elsewhere", "/login"):
        with TestClient(client.app) as fresh:
            reply = sign_up(fresh, f"n{len(target)}@example.org", next=target)
            assert reply.headers["location"] == "/account"  # type: ignore[attr-defined]


def test_log_in_attempts_are_rate_limited(client: TestClient) -> None:
    sign_up(client, "lee@example.org")
    client.post("/logout", data={"csrf": csrf_of(client, "/account")})
    codes = [log_in(client, "lee@example.org", "wrong password").status_code for _ in range(5)]  # type: ignore[attr-defined]
    assert codes == [401] * 5
    refused = log_in(client, "lee@example.org")  # the right password, too late
    assert refused.status_code == 429  # type: ignore[attr-defined]
    assert "too many attempts" in error_of(refused.text)  # type: ignore[attr-defined]
    assert int(refused.headers["retry-after"]) >= 1  # type: ignore[attr-defined]
    assert client.get("/api/v1/account").json()["signed_in"] is False
    api = client.post("/api/v1/tokens", json={"email": "lee@example.org", "password": PASSWORD})
    assert api.status_code == 429 and "Retry-After" in api.headers


def test_the_account_page_saves_the_name_and_the_hide_flag(client: TestClient) -> None:
    sign_up(client, "mo@example.org")
    token = csrf_of(client, "/account")
    saved = client.post(
        "/account", data={"display_name": "  Mo  R ", "hide_name": "on", "csrf": token}
    )
    assert saved.status_code == 200 and "data-account-notice" in saved.text
    assert client.get("/api/v1/account").json()["display_name"] == "Mo R"
    assert 'name="hide_name" checked' in client.get("/account").text
    bad = client.post("/account", data={"display_name": " ", "csrf": token})
    assert bad.status_code == 422 and "enter a name" in error_of(bad.text)
    db = client.app.state.services.db  # type: ignore[attr-defined]
    user = Accounts(db).by_email("mo@example.org")
    assert user is not None and user.hide_name and public_name(user) is None
    client.post("/account", data={"display_name": "Mo", "csrf": token})  # unticked: shown
    user = Accounts(db).by_email("mo@example.org")
    assert user is not None and public_name(user) == "Mo"


def test_the_account_page_wants_an_account(client: TestClient) -> None:
    reply = client.get("/account", follow_redirects=False)
    assert reply.status_code == 303 and reply.headers["location"].startswith("/login")


def test_api_tokens_are_shown_once_act_as_the_account_and_can_be_revoked(
    client: TestClient,
) -> None:
    sign_up(client, "tess@example.org")
    run_id = client.post("/api/v1/runs", json=GOOD).json()["id"]
    made = client.post(
        "/account/tokens", data={"token_name": "desk-script", "csrf": csrf_of(client, "/account")}
    )
    assert made.status_code == 201
    token = re.search(r'value="(kp_[^"]+)" spellcheck="false" data-new-token', made.text)
    assert token is not None
    secret = token.group(1)
    page = client.get("/account").text
    assert secret not in page and "desk-script" in page
    db = client.app.state.services.db  # type: ignore[attr-defined]
    with db.session() as s:
        hashes = list(s.scalars(select(ApiToken.token_hash)))
    assert len(hashes) == 1 and secret not in hashes[0] and len(hashes[0]) == 64
    with TestClient(client.app) as script:  # no cookie: the token alone
        bearer = {"Authorization": f"Bearer {secret}"}
        assert script.get(f"/api/v1/runs/{run_id}", headers=bearer).status_code == 200
        assert script.get("/api/v1/account", headers=bearer).json()["email"] == "tess@example.org"
        mine = script.post("/api/v1/runs", json=GOOD, headers=bearer).json()["id"]
        assert client.get(f"/api/v1/runs/{mine}").status_code == 200  # the account's run
        token_id = re.search(r'action="/account/tokens/(\d+)/revoke"', page)
        assert token_id is not None
        revoked = client.post(
            f"/account/tokens/{token_id.group(1)}/revoke",
            data={"csrf": csrf_of(client, "/account")},
        )
        assert revoked.status_code == 200 and "desk-script" not in revoked.text
        refused = script.get(f"/api/v1/runs/{run_id}", headers=bearer)
        assert refused.status_code == 401 and "not valid" in refused.json()["detail"]
        assert refused.headers["www-authenticate"].startswith("Bearer")
        # A broken header never falls back to a cookie.
        assert (
            script.get("/api/v1/account", headers={"Authorization": "Basic x"}).status_code == 401
        )


def test_a_token_for_a_password_on_the_api(client: TestClient) -> None:
    sign_up(client, "ola@example.org")
    with TestClient(client.app) as cli:
        wrong = cli.post("/api/v1/tokens", json={"email": "ola@example.org", "password": "nope"})
        assert (
            wrong.status_code == 401
            and wrong.json()["detail"] == "the e-mail address or the password is wrong"
        )
        made = cli.post("/api/v1/tokens", json={"email": "OLA@example.org", "password": PASSWORD})
        assert made.status_code == 201 and made.json()["token"].startswith("kp_")
        who = cli.get(
            "/api/v1/account", headers={"Authorization": f"Bearer {made.json()['token']}"}
        )
        assert who.json()["email"] == "ola@example.org"


def test_a_deleted_account_leaves_its_session_anonymous(client: TestClient) -> None:
    sign_up(client, "gone@example.org")
    db = client.app.state.services.db  # type: ignore[attr-defined]
    with db.session() as s:
        s.delete(s.scalar(select(User).where(User.email == "gone@example.org")))
    assert client.get("/api/v1/account").json()["signed_in"] is False
    assert client.get("/").status_code == 200


def test_a_long_name_is_cut_short_in_the_navigation(client: TestClient) -> None:
    name = "N" * 80
    sign_up(client, "long@example.org", display_name=name)
    assert f'title="{name}">{"N" * 19}…</a>' in client.get("/").text
