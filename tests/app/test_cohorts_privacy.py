"""Who sees what of the classroom, through every new route, pages and API alike: an anonymous
reader, a learner of another cohort, a learner of the cohort, a second learner of it, its
instructor, another instructor, and an admin.

Nothing leaks: a cohort or an assignment one is not in answers as one that does not exist;
a learner never sees another learner's runs or submissions; no answer a learner gets (page
or JSON) carries the assignment's hidden seed; an instructor reads their learners' runs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient

from kplay.app.db.classroom import Assignment
from kplay.app.main import create_app
from kplay.app.services.accounts import Accounts
from kplay.config import Settings
from tests.app.conftest import TEST_SECRET_KEY
from tests.app.fakes import FakeExecutor
from tests.app.test_accounts import GOOD, PASSWORD, csrf_of, log_in

PEOPLE = ("outsider", "learner", "peer", "instructor", "other_instructor", "admin")
WHO = ("anonymous", *PEOPLE)
# Members of the cohort, and those who may manage it.
MEMBERS = {"learner", "peer", "instructor", "admin"}
TEACHING = {"instructor", "admin"}


@dataclass
class World:
    clients: dict[str, TestClient]
    cohort: int
    other_cohort: int
    code: str
    assignment: int
    seed: int
    learner_run: str
    peer_run: str
    submission_run: str

    def get(self, who: str, path: str) -> tuple[int, str]:
        reply = self.clients[who].get(path, follow_redirects=False)
        return reply.status_code, reply.text

    def current_code(self) -> str:
        """The cohort's join code now (a test may have replaced it)."""
        return str(
            self.clients["instructor"].get(f"/api/v1/cohorts/{self.cohort}").json()["join_code"]
        )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One classroom for the whole module (accounts and log-ins are slow on purpose: Argon2);
    the tests that change it run last and leave what the others read as it was."""
    url = f"sqlite:///{tmp_path_factory.mktemp('classroom') / 'kplay.sqlite3'}"
    app = create_app(Settings(database_url=url, secret_key=TEST_SECRET_KEY), FakeExecutor())
    with TestClient(app):
        accounts = Accounts(app.state.services.db)
        for who in PEOPLE:
            role = {"instructor": "instructor", "other_instructor": "instructor"}.get(who)
            role = "admin" if who == "admin" else (role or "learner")
            accounts.create(f"{who}@example.org", PASSWORD, who.title(), role=role)
        clients = {who: TestClient(app) for who in WHO}
        for who in PEOPLE:
            assert log_in(clients[who], f"{who}@example.org").status_code == 303  # type: ignore[attr-defined]
        teach, other = clients["instructor"], clients["other_instructor"]
        made = teach.post("/api/v1/cohorts", json={"name": "Spring"}).json()
        elsewhere = other.post("/api/v1/cohorts", json={"name": "Autumn"}).json()
        for who in ("learner", "peer"):
            joined = clients[who].post("/api/v1/cohorts/join", json={"code": made["join_code"]})
            assert joined.status_code == 200, joined.text
        joined = clients["outsider"].post(
            "/api/v1/cohorts/join", json={"code": elsewhere["join_code"]}
        )
        assert joined.status_code == 200
        body = {
            "title": "Week 1",
            "exercises": [GOOD["cell"]],
            "deadline": "2040-01-01T00:00:00Z",
            "hidden_seed": True,
        }
        assignment = teach.post(f"/api/v1/cohorts/{made['id']}/assignments", json=body)
        assert assignment.status_code == 201, assignment.text
        aid = assignment.json()["id"]
        with app.state.services.db.session() as s:
            seed = s.get(Assignment, aid).hidden_seed  # type: ignore[union-attr]
        learner_run = clients["learner"].post("/api/v1/runs", json=GOOD).json()["id"]
        peer_run = clients["peer"].post("/api/v1/runs", json=GOOD).json()["id"]
        handed = clients["learner"].post(
            f"/api/v1/assignments/{aid}/submissions",
            json={"exercise": GOOD["cell"], "run": learner_run},
        )
        assert handed.status_code == 201, handed.text
        try:
            yield World(
                clients,
                made["id"],
                elsewhere["id"],
                made["join_code"],
                aid,
                int(seed or 0),
                learner_run,
                peer_run,
                handed.json()["grading_run"],
            )
        finally:
            for client in clients.values():
                client.close()


def _routes(w: World) -> list[str]:
    return [
        f"/cohorts/{w.cohort}",
        f"/assignments/{w.assignment}",
        f"/api/v1/cohorts/{w.cohort}",
        f"/api/v1/cohorts/{w.cohort}/assignments",
        f"/api/v1/assignments/{w.assignment}",
        f"/api/v1/assignments/{w.assignment}/submissions",
        f"/api/v1/leaderboards/vector_add?cohort={w.cohort}",
        f"/leaderboards/vector_add?cohort={w.cohort}",
    ]


def test_members_read_the_cohort_and_no_one_else_does(world: World) -> None:
    for who, path in ((who, path) for who in WHO for path in _routes(world)):
        status, text = world.get(who, path)
        if who in MEMBERS:
            assert status == 200, (path, status, text[:300])
        elif who == "anonymous" and not path.startswith(("/api/", "/leaderboards")):
            assert status == 303 and "/login" in world.clients[who].get(path).url.path
        else:
            assert status == 404, (path, status)
            assert "Spring" not in text and "Week 1" not in text
            assert "no cohort" in text or "no assignment" in text


def test_the_hidden_seed_and_others_work_never_reach_a_learner(world: World) -> None:
    for who in WHO:
        _nothing_leaks_to(world, who)


def _nothing_leaks_to(world: World, who: str) -> None:
    seen = "".join(world.get(who, p)[1] for p in _routes(world))
    seen += world.get(who, "/cohorts")[1] + world.get(who, "/api/v1/cohorts")[1]
    assert str(world.seed) not in seen  # for no one: the seed's value never leaves the server
    if who in TEACHING:
        assert world.code in seen and "Learner" in seen
        return
    assert world.code not in seen  # only those who teach the cohort see its code
    if who != "learner":
        assert world.submission_run not in seen and world.learner_run not in seen


def test_runs_are_read_by_their_owner_their_instructor_and_admins(world: World) -> None:
    readers = {"learner", "instructor", "admin"}
    for who in WHO:
        for run in (world.learner_run, world.submission_run):
            status, _ = world.get(who, f"/api/v1/runs/{run}")
            assert (status == 200) == (who in readers), (who, run, status)
        peer_status, _ = world.get(who, f"/api/v1/runs/{world.peer_run}")
        assert (peer_status == 200) == (who in {"peer", "instructor", "admin"}), who


def test_only_the_cohorts_instructors_change_it(world: World) -> None:
    for who in WHO:
        _change_as(world, who)


def _change_as(world: World, who: str) -> None:
    client = world.clients[who]
    rotated = client.post(f"/api/v1/cohorts/{world.cohort}/rotate", json={})
    body = {"title": "Sneaky", "exercises": [GOOD["cell"]], "deadline": "2040-01-01"}
    set_one = client.post(f"/api/v1/cohorts/{world.cohort}/assignments", json=body)
    expected = {"anonymous": 404, "outsider": 404, "other_instructor": 404}
    expected.update({"learner": 403, "peer": 403, "instructor": 200, "admin": 200})
    assert rotated.status_code == expected[who], rotated.text
    assert set_one.status_code == (201 if who in TEACHING else expected[who]), set_one.text
    if who not in TEACHING:
        assert rotated.json()["detail"]  # in words


def test_only_a_learner_of_the_cohort_hands_in_their_own_run(world: World) -> None:
    for who, run in ((w, r) for w in WHO for r in (world.learner_run, world.peer_run)):
        client = world.clients[who]
        reply = client.post(
            f"/api/v1/assignments/{world.assignment}/submissions",
            json={"exercise": GOOD["cell"], "run": run},
        )
        owner = "learner" if run == world.learner_run else "peer"
        if who == owner:
            assert reply.status_code == 201, reply.text
        elif who in ("learner", "peer"):
            assert reply.status_code == 404 and "of yours" in reply.json()["detail"]
        elif who in TEACHING:
            assert reply.status_code == 403
        else:
            assert reply.status_code in (401, 404) and reply.json()["detail"]


def test_the_forms_need_the_pages_token(world: World) -> None:
    client = world.clients["instructor"]
    stale = client.post(f"/cohorts/{world.cohort}/rotate", data={"csrf": "forged"})
    assert stale.status_code == 403 and "expired" in stale.text
    before = world.current_code()
    csrf = csrf_of(client, f"/cohorts/{world.cohort}")
    fine = client.post(f"/cohorts/{world.cohort}/rotate", data={"csrf": csrf})
    assert fine.status_code == 200 and "old code and link no longer join" in fine.text
    assert before not in fine.text and world.current_code() in fine.text
    cross = client.post(
        f"/api/v1/cohorts/{world.cohort}/rotate", json={}, headers={"Sec-Fetch-Site": "cross-site"}
    )
    assert cross.status_code == 403


def test_joining_by_link_and_the_pages_show_each_their_own(world: World) -> None:
    newcomer, code = world.clients["outsider"], world.current_code()
    retired = newcomer.get(f"/join/{world.code}")  # the first code: replaced since
    assert retired.status_code == 404 and "No cohort has this join code" in retired.text
    page = newcomer.get(f"/join/{code}")
    assert page.status_code == 200 and "Join “Spring”" in page.text
    assert code in page.text  # the link's own code, in its form's address
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
    joined = newcomer.post(f"/join/{code}", data={"csrf": csrf}, follow_redirects=False)
    assert joined.status_code == 303 and joined.headers["location"] == f"/cohorts/{world.cohort}"
    own = newcomer.get(f"/assignments/{world.assignment}")
    assert own.status_code == 200 and "Nothing handed in yet" in own.text
    assert world.submission_run[:8] not in own.text
    teacher = world.clients["instructor"].get(f"/assignments/{world.assignment}")
    assert world.submission_run[:8] in teacher.text and "Learner" in teacher.text
    anonymous = world.clients["anonymous"].get(f"/join/{code}", follow_redirects=False)
    assert anonymous.status_code == 303 and "next=/join/" in anonymous.headers["location"]
    missing = newcomer.get("/join/not-a-code-anyone-has")
    assert missing.status_code == 404 and "No cohort has this join code" in missing.text


def test_the_hand_in_form_answers_with_the_page_to_reload(world: World) -> None:
    learner = world.clients["learner"]
    page = learner.get(f"/assignments/{world.assignment}")
    assert f'data-submit-run="{world.learner_run}"' in page.text
    assert f'data-submit-run="{world.peer_run}"' not in page.text  # own runs only
    form = {"csrf": csrf_of(learner, f"/assignments/{world.assignment}")}
    form.update({"exercise": GOOD["cell"], "run_id": world.learner_run})
    sent = learner.post(
        f"/assignments/{world.assignment}/submit", data=form, follow_redirects=False
    )
    assert sent.status_code == 303 and "?handed=" in sent.headers["location"]
    shown = learner.get(sent.headers["location"])
    assert "Handed in; it is graded again" in shown.text and "marked late" not in shown.text
    peer = world.clients["peer"].get(sent.headers["location"])
    assert "Handed in" not in peer.text  # another's hand-in is not announced to them
    form["run_id"] = world.peer_run
    refused = learner.post(f"/assignments/{world.assignment}/submit", data=form)
    assert refused.status_code == 404 and "of yours" in refused.text
