"""Who sees a run, for every route that shows one (its state, source, verdict, compiler
panel, progress stream, profile report, a comparison) and every history: anonymous, another
learner, the owner and an admin, by session cookie and by API token. Only the owner and an
admin read a run; everyone else gets exactly the 404 of a run that does not exist."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient

from kplay.app.db.models import ProfileReport
from kplay.app.main import create_app
from kplay.app.services.accounts import Accounts
from kplay.config import Settings
from tests.app.fakes import FakeExecutor
from tests.app.test_accounts import GOOD, PASSWORD, csrf_of, log_in

CELL = "ch01-vadd-cpu"
CHAPTER = "/book/p1/first-kernel-cpu"
MISSING = "0123456789abcdef" * 2  # an id of the right form that no run has
SECOND = {**GOOD, "source": GOOD["source"] + "# attempt two\n"}

# Each route that shows one run, as (method, path with {id}); {other} is the owner's
# second run, for the comparison.
RUN_ROUTES = [
    "/api/v1/runs/{id}",
    "/api/v1/runs/{id}/profile.ncu-rep",
    "/api/v1/runs/{id}/events",
    "/runs/{id}/card",
    "/runs/{id}/compiler",
    "/cells/" + CELL + "/compare?run={id}&run={other}",
]
READERS = ["owner", "admin", "anonymous", "learner"]
CAN_READ = {"owner", "admin"}


@dataclass
class World:
    clients: dict[str, TestClient]
    tokens: dict[str, str]
    run_id: str
    other_id: str

    def get(self, who: str, path: str, bearer: bool = False) -> tuple[int, str]:
        if bearer:
            client = self.clients["script"]
            reply = client.get(path, headers={"Authorization": f"Bearer {self.tokens[who]}"})
        else:
            reply = self.clients[who].get(path)
        return reply.status_code, _plain(reply.text)


def _plain(text: str) -> str:
    """A page without what differs on every answer (the style nonce, the form token)."""
    text = re.sub(r'name="csp-nonce" content="[^"]*"', "", text)
    return re.sub(r'name="csrf" value="[^"]*"', "", text)


@pytest.fixture
def world(make_settings: Callable[..., Settings]) -> Iterator[World]:
    app = create_app(make_settings(), FakeExecutor())
    with TestClient(app):
        accounts = Accounts(app.state.services.db)
        people = {
            "owner": accounts.create("owner@example.org", PASSWORD, "Owner"),
            "learner": accounts.create("learner@example.org", PASSWORD, "Learner"),
            "admin": accounts.create("admin@example.org", PASSWORD, "Admin", role="admin"),
        }
        tokens = {who: accounts.create_token(u.id, "test")[1] for who, u in people.items()}
        clients = {who: TestClient(app) for who in (*READERS, "script")}
        for who in people:
            assert log_in(clients[who], f"{who}@example.org").status_code == 303  # type: ignore[attr-defined]
        owner = clients["owner"]
        run_id = owner.post("/api/v1/runs", json=GOOD).json()["id"]
        other_id = owner.post("/api/v1/runs", json=SECOND).json()["id"]
        with app.state.services.db.session() as s:
            s.add(ProfileReport(run_id=run_id, data=b"ncu report bytes"))
        clients["anonymous"].get("/")  # a reader of its own
        try:
            yield World(clients, tokens, run_id, other_id)
        finally:
            for client in clients.values():
                client.close()


@pytest.mark.parametrize("route", RUN_ROUTES)
@pytest.mark.parametrize("who", READERS)
def test_a_run_is_read_by_its_owner_and_admins_only(world: World, route: str, who: str) -> None:
    shown = route.format(id=world.run_id, other=world.other_id)
    status, body = world.get(who, shown)
    if who in CAN_READ:
        assert status == 200, body[:300]
        if "profile" in route:
            assert body == "ncu report bytes"
        return
    missing_status, missing = world.get(who, route.format(id=MISSING, other=world.other_id))
    assert status == missing_status == 404
    assert body == missing.replace(MISSING, world.run_id)
    assert GOOD["source"].splitlines()[-1].strip() not in body


@pytest.mark.parametrize("route", [r for r in RUN_ROUTES if r.startswith("/api/")])
@pytest.mark.parametrize("who", ["owner", "admin", "learner"])
def test_api_tokens_read_as_their_account(world: World, route: str, who: str) -> None:
    status, body = world.get(who, route.format(id=world.run_id, other=world.other_id), True)
    if who in CAN_READ:
        assert status == 200
    else:
        _, missing = world.get(who, route.format(id=MISSING, other=world.other_id), True)
        assert status == 404 and body == missing.replace(MISSING, world.run_id)


@pytest.mark.parametrize("who", READERS)
def test_histories_list_the_owners_runs_to_the_owner_only(world: World, who: str) -> None:
    listed = world.clients[who].get(f"/api/v1/cells/{CELL}/runs").json()
    fragment = world.clients[who].get(f"/cells/{CELL}/history").text
    chapter = world.clients[who].get(CHAPTER).text
    seen = [world.run_id in text for text in (str(listed), fragment, chapter)]
    # An admin reads any run by its id, but a cell's history is the viewer's own attempts.
    assert seen == [who == "owner"] * 3


def test_an_admin_reads_the_card_the_owner_reads(world: World) -> None:
    # The card places the run among the owner's attempts, for the admin too.
    for run_id in (world.run_id, world.other_id):
        path = f"/runs/{run_id}/card"
        assert world.get("admin", path) == world.get("owner", path)


@pytest.mark.parametrize("who", READERS)
def test_only_the_owner_shares_a_run(world: World, who: str) -> None:
    client = world.clients[who]
    reply = client.post(f"/api/v1/runs/{world.run_id}/share")
    missing = client.post(f"/api/v1/runs/{MISSING}/share")
    if who == "owner":
        assert reply.status_code == 200 and reply.json()["url"].startswith("/shared/")
    else:
        assert reply.status_code == missing.status_code == 404
        assert reply.json()["detail"] == missing.json()["detail"].replace(MISSING, world.run_id)


def test_a_logged_out_owner_reads_nothing(world: World) -> None:
    owner = world.clients["owner"]
    owner.post("/logout", data={"csrf": csrf_of(owner, "/account")})
    assert owner.get(f"/api/v1/runs/{world.run_id}").status_code == 404
    assert owner.get(f"/runs/{world.run_id}/card").status_code == 404
