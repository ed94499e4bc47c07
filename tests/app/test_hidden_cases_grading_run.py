"""End to end on numba-cpu, through the real LocalExecutor: a learner's kernel that every
public case of vector_add passes is handed in twice. The assignment without hidden cases
grades it; the one whose instructor added a hidden case of a size the public cases never use
fails it, and the grading run the learner reads says which case without its shape."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from kplay.app.main import create_app
from kplay.config import Settings
from tests.app.conftest import TEST_SECRET_KEY
from tests.app.test_hidden_grading_cases import CASES, EXERCISE, PEOPLE, SECRET_NAME, open_room
from tests.app.test_real_executor import wait_final
from tests.kernels.test_hidden_cases_engine import TAIL_BUG


def _submission(client: TestClient, assignment: int, limit_s: float = 240.0) -> dict:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        found = client.get(f"/api/v1/assignments/{assignment}/submissions").json()
        if found and found[0]["state"] != "pending":
            return dict(found[0])
        time.sleep(0.3)
    pytest.fail("the submission was not graded in time")


@pytest.mark.slow
def test_a_hidden_case_fails_a_kernel_the_public_cases_pass(tmp_path: Path) -> None:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'kplay.sqlite3'}",
        secret_key=TEST_SECRET_KEY,
        pool_size=1,
        job_timeout_s=180,
    )
    app = create_app(settings)
    # From this machine: where the sandbox cannot be had, only local runs are taken.
    with TestClient(app, client=("127.0.0.1", 50000)):
        clients = {who: TestClient(app, client=("127.0.0.1", 50000)) for who in PEOPLE}
        cohort, with_cases = open_room(app, clients)
        teach, learner = clients["instructor"], clients["learner"]
        put = teach.put(
            f"/api/v1/assignments/{with_cases}/hidden-cases/{EXERCISE}", json={"cases": CASES}
        )
        assert put.status_code == 200, put.text
        body = {"title": "Week 1, public cases", "exercises": [EXERCISE], "deadline": "2040-01-01"}
        made = teach.post(f"/api/v1/cohorts/{cohort}/assignments", json=body)
        without = int(made.json()["id"])

        posted = learner.post(
            "/api/v1/runs",
            json={"problem": "vector_add", "backend": "numba-cpu", "source": TAIL_BUG,
                  "cell": EXERCISE},
        )  # fmt: skip
        assert posted.status_code == 201, posted.text
        run = wait_final(learner, posted.json()["id"])
        assert run["state"] == "done", run["detail"]  # every public case passes it

        for assignment in (without, with_cases):
            handed = learner.post(
                f"/api/v1/assignments/{assignment}/submissions",
                json={"exercise": EXERCISE, "run": run["id"]},
            )
            assert handed.status_code == 201, handed.text
        plain, hidden = _submission(learner, without), _submission(learner, with_cases)
        assert plain["state"] == "graded", plain
        assert hidden["state"] == "failed", hidden

        grading = wait_final(learner, hidden["grading_run"])
        assert grading["state"] == "wrong"
        last = grading["result"]["check"]["cases"][-1]
        assert last["name"] == "hidden-1" and last["hidden"] and not last["ok"]
        assert last["params"] == {} and last["first_mismatch_index"] is None
        shown = learner.get(f"/api/v1/runs/{hidden['grading_run']}").text
        card = learner.get(f"/runs/{hidden['grading_run']}/card").text
        for text in (shown, card):
            assert SECRET_NAME not in text and "1002" not in text
        assert "hidden grading case" in card
        for client in clients.values():
            client.close()
