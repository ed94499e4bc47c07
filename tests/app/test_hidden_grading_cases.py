"""An assignment's hidden grading cases through the app: set by the cohort's instructor (API and
page form), checked against the exercise's problem with reasons in words, carried to the
grader in the grading run's job, and never shown to a learner (no page, no JSON)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from kplay.app.db.classroom import Assignment
from kplay.app.main import create_app
from kplay.app.services.accounts import Accounts
from kplay.app.services.reconcile import job_of
from kplay.config import Settings
from kplay.kernels.models import GradingCase
from tests.app.conftest import TEST_SECRET_KEY
from tests.app.fakes import FakeExecutor
from tests.app.test_accounts import GOOD, PASSWORD, csrf_of, log_in

EXERCISE = GOOD["cell"]
# A name and a size a learner must never read anywhere.
SECRET_NAME, SECRET_N = "two-left-over-edge", 1002
CASES = f'[[tests]]\nname = "{SECRET_NAME}"\nparams = {{ n = {SECRET_N} }}\nseed = 9\n'
PEOPLE = ("instructor", "learner", "outsider")


@dataclass
class Room:
    app: FastAPI
    executor: FakeExecutor
    clients: dict[str, TestClient]
    cohort: int
    assignment: int

    def put(self, who: str, text: str, exercise: str = EXERCISE) -> tuple[int, dict]:
        path = f"/api/v1/assignments/{self.assignment}/hidden-cases/{exercise}"
        reply = self.clients[who].put(path, json={"cases": text})
        return reply.status_code, reply.json()


def open_room(app: FastAPI, clients: dict[str, TestClient]) -> tuple[int, int]:
    accounts = Accounts(app.state.services.db)
    for who in PEOPLE:
        role = "instructor" if who == "instructor" else "learner"
        accounts.create(f"{who}@example.org", PASSWORD, who.title(), role=role)
        assert log_in(clients[who], f"{who}@example.org").status_code == 303  # type: ignore[attr-defined]
    made = clients["instructor"].post("/api/v1/cohorts", json={"name": "Spring"}).json()
    joined = clients["learner"].post("/api/v1/cohorts/join", json={"code": made["join_code"]})
    assert joined.status_code == 200, joined.text
    body = {"title": "Week 1", "exercises": [EXERCISE], "deadline": "2040-01-01T00:00:00Z"}
    made_a = clients["instructor"].post(f"/api/v1/cohorts/{made['id']}/assignments", json=body)
    assert made_a.status_code == 201, made_a.text
    return int(made["id"]), int(made_a.json()["id"])


@pytest.fixture(scope="module")
def room(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Room]:
    url = f"sqlite:///{tmp_path_factory.mktemp('hidden') / 'kplay.sqlite3'}"
    executor = FakeExecutor()
    app = create_app(Settings(database_url=url, secret_key=TEST_SECRET_KEY), executor)
    with TestClient(app):
        clients = {who: TestClient(app) for who in PEOPLE}
        try:
            cohort, assignment = open_room(app, clients)
            yield Room(app, executor, clients, cohort, assignment)
        finally:
            for client in clients.values():
                client.close()


def test_bad_hidden_cases_are_refused_with_reasons(room: Room) -> None:
    bad = [
        ("[[tests]\nname = 1", "not valid TOML"),
        ('[cases]\nname = "x"', "unknown key 'cases'"),
        ("[[tests]]\nparams = { n = 5 }", "give it a name"),
        ('[[tests]]\nname = "x"\nparams = { m = 5 }', "no parameter 'm'; its parameters are n"),
        ('[[tests]]\nname = "x"\nparams = { }', "params needs n"),
        ('[[tests]]\nname = "x"\nparams = { n = 0 }', "n = 0 is out of range"),
        ('[[tests]]\nname = "x"\nparams = { n = 2.5 }', "n is a whole number"),
        ('[[tests]]\nname = "x"\nparams = { n = 100000000 }', "at most 64 MiB"),
        ('[[tests]]\nname = "x"\nparams = { n = 5 }\nseed = -1', "seed is a whole number"),
        ('[[tests]]\nname = "x"\nparams = { n = 5 }\nsize = 3', "unknown key 'size'"),
        ('[[tests]]\nname = "x"\nparams = { n = 5 }\n' * 2, "two cases have this name"),
        ('[[tests]]\nname = "x"\nparams = { n = 5 }\n' * 9, "at most 8 per exercise"),
    ]
    for text, words in bad:
        status, body = room.put("instructor", text)
        assert status == 422, (text, body)
        assert words in body["detail"], (words, body["detail"])
    status, body = room.put("instructor", CASES, exercise="ch01-no-such-cell")
    assert status == 422 and "not part of this assignment" in body["detail"]
    # Nothing was kept by any of them.
    read = room.clients["instructor"].get(f"/api/v1/assignments/{room.assignment}/hidden-cases")
    assert read.json() == {EXERCISE: []}


def test_only_the_instructor_sets_and_reads_hidden_cases(room: Room) -> None:
    status, body = room.put("instructor", CASES)
    assert status == 200, body
    assert body["cases"] == [{"name": SECRET_NAME, "params": {"n": SECRET_N}, "seed": 9}]
    path = f"/api/v1/assignments/{room.assignment}/hidden-cases"
    assert room.clients["instructor"].get(path).json() == {EXERCISE: body["cases"]}
    assert room.clients["learner"].get(path).status_code == 403
    assert room.clients["outsider"].get(path).status_code == 404
    assert room.put("learner", '[[tests]]\nname = "y"\nparams = { n = 3 }')[0] == 403
    assert room.put("outsider", '[[tests]]\nname = "y"\nparams = { n = 3 }')[0] == 404
    # The instructor's page shows them in problem.toml's notation, in the form that sets them.
    page = room.clients["instructor"].get(f"/assignments/{room.assignment}").text
    assert f'data-hidden-cases-form="{EXERCISE}"' in page
    assert SECRET_NAME in page and f"params = {{ n = {SECRET_N} }}" in page


def test_the_learner_never_sees_them_and_the_grader_gets_them(room: Room) -> None:
    assert room.put("instructor", CASES)[0] == 200
    learner = room.clients["learner"]
    run = learner.post("/api/v1/runs", json=GOOD).json()["id"]
    handed = learner.post(
        f"/api/v1/assignments/{room.assignment}/submissions",
        json={"exercise": EXERCISE, "run": run},
    )
    assert handed.status_code == 201, handed.text
    job = room.executor.jobs[-1]
    assert job.hidden_cases == [GradingCase(name=SECRET_NAME, params={"n": SECRET_N}, seed=9)]
    grading = handed.json()["grading_run"]
    seen = [
        f"/assignments/{room.assignment}",
        f"/cohorts/{room.cohort}",
        f"/api/v1/assignments/{room.assignment}",
        f"/api/v1/assignments/{room.assignment}/submissions",
        f"/api/v1/cohorts/{room.cohort}",
        f"/api/v1/cohorts/{room.cohort}/assignments",
        f"/api/v1/runs/{grading}",
        f"/runs/{grading}/card",
    ]
    for path in seen:
        reply = learner.get(path)
        assert reply.status_code == 200, (path, reply.status_code)
        assert SECRET_NAME not in reply.text and str(SECRET_N) not in reply.text, path
        assert "data-hidden-cases-form" not in reply.text and "[[tests]]" not in reply.text
    # A grading run queued again from the database (a lost broker) keeps its hidden cases.
    with room.app.state.services.db.session() as s:
        from kplay.app.db.models import Run

        stored = s.get(Run, grading)
        assert stored is not None
        again = job_of(stored, room.app.state.services.db)
    assert again.hidden_cases == job.hidden_cases and again.secret_seed == job.secret_seed


def test_the_page_form_sets_them_and_keeps_a_refused_text(room: Room) -> None:
    teach = room.clients["instructor"]
    path = f"/assignments/{room.assignment}"
    token = csrf_of(teach, path)
    wrong = '[[tests]]\nname = "z"\nparams = { q = 3 }'
    form = {"exercise": EXERCISE, "cases": wrong, "csrf": token}
    refused = teach.post(f"{path}/hidden-cases", data=form, follow_redirects=False)
    assert refused.status_code == 422
    assert "no parameter &#39;q&#39;" in refused.text and "q = 3" in refused.text
    form["cases"] = '[[tests]]\nname = "odd"\nparams = { n = 77 }'
    kept = teach.post(f"{path}/hidden-cases", data=form, follow_redirects=False)
    assert kept.status_code == 303
    with room.app.state.services.db.session() as s:
        row = s.get(Assignment, room.assignment)
        assert row is not None and row.hidden_cases == {
            EXERCISE: [{"name": "odd", "params": {"n": 77}, "seed": 1}]
        }
    form["cases"] = ""
    assert teach.post(f"{path}/hidden-cases", data=form, follow_redirects=False).status_code == 303
    assert teach.get(f"/api/v1{path}/hidden-cases").json() == {EXERCISE: []}
    # A learner's form post is refused, as a learner's page has no form.
    learner = room.clients["learner"]
    form["csrf"] = csrf_of(learner, path)
    form["cases"] = '[[tests]]\nname = "mine"\nparams = { n = 3 }'
    assert learner.post(f"{path}/hidden-cases", data=form).status_code == 403
    assert not re.search(r"data-hidden-cases-form", learner.get(path).text)
