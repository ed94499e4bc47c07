"""The classroom the route sweep (test_route_sweep_privacy.py) requests every route in: an admin,
an instructor with a cohort and an assignment (hidden seed and hidden grading cases), learner A
and a classmate C in it, learner B in the admin's cohort, who hides their name on the boards,
and an anonymous reader. Whatever one of them must not read elsewhere is a marker string: run
sources, e-mail addresses, the hidden name, the seed, the hidden cases, a prediction."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from fastapi.routing import _IncludedRouter
from fastapi.testclient import TestClient
from sqlalchemy import inspect, select, text
from starlette.routing import BaseRoute

from kplay.app.db.classroom import Assignment
from kplay.app.db.models import ProfileReport, Run
from kplay.app.services.accounts import Accounts
from tests.app.storedruns import T0, job, store, verified
from tests.app.test_accounts import GOOD, PASSWORD, log_in

PREDICT = "ch03-triad-predict"
TRIAD = "import numba\n\n@numba.njit\ndef triad(a, b, c, s, n):\n    pass\n"
SEED = 7_390_416_252_811  # the assignment's hidden seed, set to a value no page has by chance
CASE_NAME = "mark-hidden-case-5e0d"
CASES = f'[[tests]]\nname = "{CASE_NAME}"\nparams = {{ n = 1009 }}\nseed = 9\n'
WHO = ("anonymous", "a", "b", "instructor", "admin")
# Each marker and who may read it: the rest must never see it, on any route.
MARKERS = {
    "MARK_A_SOURCE_93b1": {"a", "instructor", "admin"},
    "MARK_B_SOURCE_5c2e": {"b", "admin"},
    "MARK_C_SOURCE_0a7f": {"instructor", "admin"},
    "mark-email-a-41c9@example.org": {"a", "instructor", "admin"},
    "mark-email-b-8d02@example.org": {"b", "admin"},
    "mark-email-c-66ab@example.org": {"instructor", "admin"},
    "mark-email-instructor-2f5b@example.org": {"instructor", "admin"},
    "mark-email-admin-c3d8@example.org": {"admin"},
    "Mark Hidden Name 7q4z": {"b", "admin"},  # B hides their name on the boards
    "Mark Classmate Name 3k8w": {"instructor", "admin"},  # C: classmates do not see it
    str(SEED): set(),  # the seed's value never leaves the server
    CASE_NAME: {"instructor", "admin"},
    "47.3 %": {"a", "instructor", "admin"},  # A's prediction
    "MARK_A_PROFILE_1e4b": {"a", "instructor", "admin"},  # A's run's profile report
}
EMAILS = {
    "a": "mark-email-a-41c9@example.org",
    "b": "mark-email-b-8d02@example.org",
    "c": "mark-email-c-66ab@example.org",
    "instructor": "mark-email-instructor-2f5b@example.org",
    "admin": "mark-email-admin-c3d8@example.org",
}
NAMES = {"b": "Mark Hidden Name 7q4z", "c": "Mark Classmate Name 3k8w"}


def with_mark(source: str, mark: str) -> str:
    return f"{source}# {mark}\n"


@dataclass
class World:
    app: FastAPI
    clients: dict[str, TestClient]
    users: dict[str, int]  # a, b, c, instructor, admin -> account id
    cohort: int  # the instructor's: A and C
    other_cohort: int  # the admin's: B
    code: str
    assignment: int
    runs: dict[str, str]  # a, a_graded, a_shared, b, b_board, c -> run id
    prediction: int
    share_token: str
    token_id: int  # one of A's API tokens
    extra: dict[str, Any] = field(default_factory=dict)

    def snapshot(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table."""
        engine = self.app.state.services.db.engine
        tables = sorted(inspect(engine).get_table_names())
        with engine.connect() as conn:
            return {
                t: sorted(map(tuple, conn.execute(text(f'SELECT * FROM "{t}"'))), key=repr)
                for t in tables
            }


def all_routes(routes: list[BaseRoute]) -> Iterator[Any]:
    """The app's routes, those of included routers (nested too) one by one."""
    for route in routes:
        if isinstance(route, _IncludedRouter):
            yield from route.effective_route_contexts()
        else:
            yield route


def build(app: FastAPI) -> World:
    db = app.state.services.db
    accounts = Accounts(db)
    roles = {"instructor": "instructor", "admin": "admin"}
    users = {
        who: accounts.create(
            EMAILS[who], PASSWORD, NAMES.get(who, who.title()), role=roles.get(who, "learner")
        ).id
        for who in ("a", "b", "c", "instructor", "admin")
    }
    accounts.update_profile(users["b"], NAMES["b"], hide_name=True)
    clients = {who: TestClient(app) for who in WHO}
    for who in ("a", "b", "instructor", "admin"):
        assert log_in(clients[who], EMAILS[who]).status_code == 303  # type: ignore[attr-defined]
    clients["anonymous"].get("/")
    c_token = accounts.create_token(users["c"], "script")[1]
    token_id = accounts.create_token(users["a"], "laptop")[0].id
    teach, admin = clients["instructor"], clients["admin"]
    made = teach.post("/api/v1/cohorts", json={"name": "Spring"}).json()
    other = admin.post("/api/v1/cohorts", json={"name": "Autumn"}).json()
    c_client = TestClient(app, headers={"Authorization": f"Bearer {c_token}"})
    for client, code in ((clients["a"], made), (c_client, made), (clients["b"], other)):
        joined = client.post("/api/v1/cohorts/join", json={"code": code["join_code"]})
        assert joined.status_code == 200, joined.text
    body = {
        "title": "Week 1",
        "exercises": [GOOD["cell"]],
        "deadline": "2040-01-01T00:00:00Z",
        "hidden_seed": True,
    }
    made_a = teach.post(f"/api/v1/cohorts/{made['id']}/assignments", json=body)
    assert made_a.status_code == 201, made_a.text
    aid = made_a.json()["id"]
    with db.session() as s:
        s.get(Assignment, aid).hidden_seed = SEED  # type: ignore[union-attr]
    cases = teach.put(
        f"/api/v1/assignments/{aid}/hidden-cases/{GOOD['cell']}", json={"cases": CASES}
    )
    assert cases.status_code == 200, cases.text
    runs = {}
    for who, client, mark in (
        ("a", clients["a"], "MARK_A_SOURCE_93b1"),
        ("a_shared", clients["a"], "shared on purpose"),
        ("b", clients["b"], "MARK_B_SOURCE_5c2e"),
        ("c", c_client, "MARK_C_SOURCE_0a7f"),
    ):
        made_run = client.post(
            "/api/v1/runs", json={**GOOD, "source": with_mark(GOOD["source"], mark)}
        )
        assert made_run.status_code in (200, 201, 202), made_run.text
        runs[who] = made_run.json()["id"]
    handed = clients["a"].post(
        f"/api/v1/assignments/{aid}/submissions", json={"exercise": GOOD["cell"], "run": runs["a"]}
    )
    assert handed.status_code == 201, handed.text
    runs["a_graded"] = handed.json()["grading_run"]
    shared = clients["a"].post(f"/api/v1/runs/{runs['a_shared']}/share")
    assert shared.status_code == 200, shared.text
    share_token = shared.json()["url"].rstrip("/").rsplit("/", 1)[-1]
    # B's verified run puts B on the public board, under no name.
    runs["b_board"] = store(db, f"acct:{users['b']}", verified(job(backend="numba-cpu"), 50.0), T0)
    with db.session() as s:
        row = s.scalars(select(Run).where(Run.id == runs["b_board"])).one()
        row.source = with_mark(GOOD["source"], "MARK_B_SOURCE_5c2e")
    with db.session() as s:
        s.add(ProfileReport(run_id=runs["a"], data=b"ncu report MARK_A_PROFILE_1e4b"))
    predicted = clients["a"].post(f"/api/v1/cells/{PREDICT}/predictions", json={"value": "47.3"})
    assert predicted.status_code == 201, predicted.text
    c_client.close()
    board = clients["anonymous"].get("/api/v1/leaderboards/vector_add").json()
    assert [row["mine"] for row in board["rows"]] == [False]  # B's row, under no name
    for run_id in runs.values():  # finished: their event streams end
        assert clients["admin"].get(f"/api/v1/runs/{run_id}").json()["state"] == "done"
    return World(
        app,
        clients,
        users,
        made["id"],
        other["id"],
        made["join_code"],
        aid,
        runs,
        int(predicted.json()["prediction"]),
        share_token,
        token_id,
    )
