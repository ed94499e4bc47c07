"""Each browser (or API client keeping its cookie) is an anonymous reader of its own, in a
signed session cookie: its runs, their sources and its history are its own, and no cookie a
client makes up reads or writes another reader's."""

from __future__ import annotations

import types

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from itsdangerous import URLSafeTimedSerializer

from kplay.app.readers import COOKIE, MAX_AGE_S, REFRESH_AFTER_S, SALT
from tests.app.conftest import TEST_SECRET_KEY

CELL = "/cells/ch01-vadd-cpu/runs"
SOURCE = "import numba\n\n@numba.njit\ndef vector_add(a, b, out, n):\n    pass\n"
PAGE = {"HX-Request": "true"}
BODY = {"problem": "vector_add", "backend": "numba-cpu", "source": SOURCE, "cell": "ch01-vadd-cpu"}


def _signed(reader: str, key: str = TEST_SECRET_KEY) -> str:
    return URLSafeTimedSerializer(key, salt=SALT).dumps({"reader": reader})


def _give(client: TestClient, value: str) -> None:
    """Make `client` present `value` as its session cookie, as the server's own would be."""
    client.cookies.clear()
    client.cookies.set(COOKIE, value, domain="testserver.local")


def _start(client: TestClient) -> str:
    reply = client.post("/api/v1/runs", json=BODY)
    assert reply.status_code == 201, reply.text
    return str(reply.json()["id"])


def test_two_browsers_keep_separate_histories(app: FastAPI) -> None:
    with TestClient(app) as alice, TestClient(app) as bob:
        alice.get("/")
        bob.get("/")
        assert alice.cookies.get(COOKIE) and bob.cookies.get(COOKIE)
        assert alice.cookies.get(COOKIE) != bob.cookies.get(COOKIE)
        posted = alice.post(CELL, data={"backend": "numba-cpu", "source": SOURCE}, headers=PAGE)
        assert posted.status_code == 201
        mine = alice.get("/api/v1/cells/ch01-vadd-cpu/runs").json()
        theirs = bob.get("/api/v1/cells/ch01-vadd-cpu/runs").json()
        assert len(mine) == 1 and theirs == []


def test_the_cookie_is_signed_and_holds_the_full_id(client: TestClient) -> None:
    client.get("/")
    raw = client.cookies[COOKIE]
    payload = URLSafeTimedSerializer(TEST_SECRET_KEY, salt=SALT).loads(raw, max_age=MAX_AGE_S)
    reader = payload["reader"]
    assert len(reader) == 32 and int(reader, 16) >= 0
    run_id = _start(client)
    owner = client.get(f"/api/v1/runs/{run_id}").json()["user"]
    assert owner == f"anonymous-{reader}"  # the whole id, not a prefix


def test_an_api_client_reads_its_runs_only_with_its_session(app: FastAPI) -> None:
    with TestClient(app) as client, TestClient(app) as stranger:
        run_id = _start(client)
        assert COOKIE in client.cookies  # the new session came back with the answer
        assert client.get(f"/api/v1/runs/{run_id}").json()["source"] == SOURCE
        assert len(client.get("/api/v1/cells/ch01-vadd-cpu/runs").json()) == 1
        # Without the cookie: a new reader, who sees nothing of it.
        assert stranger.get(f"/api/v1/runs/{run_id}").status_code == 404
        assert stranger.get("/api/v1/cells/ch01-vadd-cpu/runs").json() == []


def test_another_readers_run_is_not_found_on_every_route(app: FastAPI) -> None:
    with TestClient(app) as alice, TestClient(app) as bob:
        run_id = _start(alice)
        bob.get("/")
        for url in (f"/api/v1/runs/{run_id}", f"/runs/{run_id}/card"):
            theirs, missing = bob.get(url), bob.get(url.replace(run_id, "f" * 32))
            # Exactly as for a run that does not exist, so ids cannot be probed.
            assert theirs.status_code == missing.status_code == 404
            assert SOURCE not in theirs.text and run_id in theirs.text
            assert theirs.text.replace(run_id, "ID") == missing.text.replace("f" * 32, "ID")
        chapter = bob.get("/book/p1/first-kernel-cpu").text
        assert run_id not in chapter and "data-run-card" not in chapter
        assert alice.get(f"/runs/{run_id}/card").status_code == 200


@pytest.mark.parametrize(
    "forged",
    [
        "0123456789abcdef0123456789abcdef",  # the old, unsigned kind of cookie
        _signed("0123456789abcdef0123456789abcdef", key="some-other-key-" + "x" * 32),
        "garbage",
    ],
    # Fixed ids: the signed cookie holds its signing time, and every xdist process must
    # collect the same names.
    ids=["unsigned", "signed-with-another-key", "garbage"],
)
def test_a_forged_cookie_is_a_new_reader(client: TestClient, forged: str) -> None:
    _give(client, forged)
    client.get("/")
    assert client.cookies[COOKIE] != forged


def test_a_tampered_cookie_reads_nothing(app: FastAPI) -> None:
    with TestClient(app) as alice, TestClient(app) as mallory:
        run_id = _start(alice)
        payload, _, signature = alice.cookies[COOKIE].partition(".")
        other = _signed("0" * 32).partition(".")[0]  # another reader's payload, alice's signature
        _give(mallory, f"{other}.{signature}")
        assert mallory.get(f"/api/v1/runs/{run_id}").status_code == 404
        assert mallory.cookies[COOKIE].partition(".")[0] not in (payload, other)


def test_a_signed_cookie_of_another_reader_id_reads_nothing(app: FastAPI) -> None:
    with TestClient(app) as alice, TestClient(app) as mallory:
        run_id = _start(alice)
        mallory.cookies.set(COOKIE, _signed("f" * 32))
        assert mallory.get(f"/api/v1/runs/{run_id}").status_code == 404


def _at(monkeypatch: pytest.MonkeyPatch, seconds_ago: float) -> None:
    import itsdangerous.timed as timed

    real = timed.time.time
    monkeypatch.setattr(timed, "time", types.SimpleNamespace(time=lambda: real() - seconds_ago))


def test_an_expired_cookie_is_a_new_reader(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    _at(monkeypatch, MAX_AGE_S + 3600)
    old = _signed("a" * 32)
    monkeypatch.undo()
    _give(client, old)
    run_id = _start(client)
    assert client.get(f"/api/v1/runs/{run_id}").json()["user"] != "anonymous-" + "a" * 32


def test_an_old_cookie_is_signed_again_and_a_fresh_one_is_not(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    _at(monkeypatch, REFRESH_AFTER_S + 3600)
    old = _signed("a" * 32)
    monkeypatch.undo()
    _give(client, old)
    reply = client.get("/")
    assert "set-cookie" in reply.headers and client.cookies[COOKIE] != old
    assert client.get("/").headers.get("set-cookie") is None


def test_the_cookie_is_http_only_same_site_and_secure_over_https(app: FastAPI) -> None:
    with TestClient(app) as plain, TestClient(app, base_url="https://testserver") as tls:
        cookie = plain.get("/").headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=lax" in cookie and "secure" not in cookie
        assert "secure" in tls.get("/").headers["set-cookie"].lower()


def test_static_files_and_api_reads_start_no_session(client: TestClient) -> None:
    assert "set-cookie" not in client.get("/static/css/book.css").headers
    assert "set-cookie" not in client.get("/api/v1/problems").headers
