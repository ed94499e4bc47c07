"""Each browser is an anonymous reader of its own: its history is its own."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from kplay.app.readers import COOKIE

CELL = "/cells/ch01-vadd-cpu/runs"
SOURCE = "import numba\n\n@numba.njit\ndef vector_add(a, b, out, n):\n    pass\n"
PAGE = {"HX-Request": "true"}


def test_two_browsers_keep_separate_histories(app: FastAPI) -> None:
    with TestClient(app) as alice, TestClient(app) as bob:
        alice.get("/")
        bob.get("/")
        assert alice.cookies.get(COOKIE) and bob.cookies.get(COOKIE)
        assert alice.cookies.get(COOKIE) != bob.cookies.get(COOKIE)
        assert (
            alice.post(
                CELL, data={"backend": "numba-cpu", "source": SOURCE}, headers=PAGE
            ).status_code
            < 400
        )
        cookie = {COOKIE: alice.cookies.get(COOKIE)}
        mine = alice.get("/api/v1/cells/ch01-vadd-cpu/runs", cookies=cookie).json()
        theirs = bob.get(
            "/api/v1/cells/ch01-vadd-cpu/runs", cookies={COOKIE: bob.cookies.get(COOKIE)}
        ).json()
        assert len(mine) == 1 and theirs == []


def test_api_clients_without_cookie_share_one_reader(app: FastAPI) -> None:
    with TestClient(app) as client:
        body = {
            "problem": "vector_add",
            "backend": "numba-cpu",
            "source": SOURCE,
            "cell": "ch01-vadd-cpu",
        }
        assert client.post("/api/v1/runs", json=body).status_code == 201
        assert COOKIE not in client.cookies
        assert len(client.get("/api/v1/cells/ch01-vadd-cpu/runs").json()) == 1
