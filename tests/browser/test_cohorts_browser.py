"""The classroom in a real browser, against the real server and its real executor: an
instructor signs up (and is made an instructor with the accounts service), makes a cohort
and sets an assignment; a learner signs up, joins by the link, runs the exercise's cell,
hands the run in and waits for the grading run's verdict; the instructor sees the hand-in.
Screenshots land in test-artifacts/; the pages report no CSP violation."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kplay.app.db.session import Database
from kplay.app.services.accounts import Accounts
from tests.browser.test_playground import (  # noqa: F401 - the module's browser fixture
    ARTIFACTS,
    CELL,
    GOOD,
    RUN_LIMIT_MS,
    _card_id,
    _csp_reports,
    _replace_code,
    _require_browser,
    _wait_new_final_card,
    _watch_csp,
    browser,
    running_server,
)

pytestmark = pytest.mark.browser

CHAPTER = "/book/p1/first-kernel-cpu"
EXERCISE = CELL.removeprefix("#cell-")
PASSWORD = "a password long enough"


@pytest.fixture(scope="module")
def classroom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The server, as test_playground starts it, and the URL of its database."""
    _require_browser()
    with running_server(tmp_path_factory.mktemp("classroom")) as (url, database_url):
        yield url, database_url


def _shot(page: object, name: str) -> None:
    Path(ARTIFACTS).mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)  # type: ignore[attr-defined]


def _sign_up(page: object, server: str, email: str, name: str) -> None:
    page.goto(server + "/signup")  # type: ignore[attr-defined]
    page.fill("#account-email", email)  # type: ignore[attr-defined]
    page.fill("#account-password", PASSWORD)  # type: ignore[attr-defined]
    page.fill("#account-display_name", name)  # type: ignore[attr-defined]
    page.click("[data-signup-form] button[type=submit]")  # type: ignore[attr-defined]
    page.wait_for_selector("[data-nav-account]")  # type: ignore[attr-defined]


def _make_instructor(database_url: str, email: str) -> None:
    db = Database(database_url)
    try:
        accounts = Accounts(db)
        user = accounts.by_email(email)
        assert user is not None
        accounts.set_role(user.id, "instructor")
    finally:
        db.dispose()


def _final_state(page: object, limit_s: float) -> str:
    """Reload the assignment page until its newest submission has left `pending`."""
    deadline = time.monotonic() + limit_s
    while True:
        state = page.get_attribute("[data-submission]", "data-state")  # type: ignore[attr-defined]
        if state != "pending" or time.monotonic() > deadline:
            return str(state)
        time.sleep(1.0)
        page.reload()  # type: ignore[attr-defined]


def test_a_cohort_from_sign_up_to_a_graded_hand_in(
    classroom: tuple[str, str],
    browser: object,  # noqa: F811
) -> None:
    server, database_url = classroom
    errors: list[str] = []

    # The instructor: signs up, is made an instructor, makes a cohort and an assignment.
    teacher = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()  # type: ignore[attr-defined]
    teacher.on("pageerror", lambda exc: errors.append(str(exc)))
    teacher_csp = _watch_csp(teacher)
    _sign_up(teacher, server, "teacher@example.org", "Teacher")
    teacher.goto(server + "/cohorts")
    assert teacher.query_selector("[data-cohort-form]") is None  # a learner makes none
    _make_instructor(database_url, "teacher@example.org")
    teacher.goto(server + "/cohorts")
    teacher.fill("#cohort-name", "Spring kernels")
    teacher.click("[data-cohort-form] button[type=submit]")
    teacher.wait_for_selector("[data-join-url]")
    join_url = teacher.input_value("[data-join-url]")
    assert "/join/" in join_url
    teacher.fill("#assignment-title", "Week 1: add two vectors")
    teacher.check(f"[data-assignment-form] input[value='{EXERCISE}']")
    teacher.fill("#assignment-deadline", "2040-01-01T12:00")
    teacher.check("#assignment-hidden")
    teacher.click("[data-assignment-form] button[type=submit]")
    teacher.wait_for_selector("[data-assignment-page]")
    assignment_url = teacher.url
    _shot(teacher, "cohorts-assignment-instructor.png")

    # The learner: signs up, joins by the link, runs the cell, hands the run in.
    learner = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()  # type: ignore[attr-defined]
    learner.on("pageerror", lambda exc: errors.append(str(exc)))
    learner_csp = _watch_csp(learner)
    _sign_up(learner, server, "learner@example.org", "Learner")
    learner.goto(join_url)
    assert "Spring kernels" in learner.inner_text("h1")
    learner.click("[data-join-link-form] button[type=submit]")
    learner.wait_for_selector("[data-cohort]")
    assert learner.get_attribute("[data-cohort]", "data-cohort-role") == "learner"
    assert learner.query_selector("[data-join-url]") is None
    _shot(learner, "cohorts-cohort-learner.png")
    learner.goto(server + CHAPTER)
    learner.wait_for_selector(f"{CELL} .cm-editor")
    _replace_code(learner, GOOD)
    before = _card_id(learner, CELL)
    learner.click(f"{CELL} [data-run]")
    _wait_new_final_card(learner, CELL, before)
    run_id = _card_id(learner, CELL)
    assert run_id
    learner.goto(assignment_url)
    learner.click(f"[data-submit-run='{run_id}']")
    learner.wait_for_selector("[data-submission]")
    assert "Handed in" in learner.inner_text("[data-cohort-notice]")
    state = _final_state(learner, RUN_LIMIT_MS / 1000)
    assert state == "graded", learner.inner_text("[data-submissions]")
    _shot(learner, "cohorts-submission-learner.png")

    # The instructor sees the hand-in, graded, with the learner's name.
    teacher.goto(assignment_url)
    row = teacher.inner_text("[data-submissions]")
    assert "Learner" in row and "Graded" in row
    _shot(teacher, "cohorts-submissions-instructor.png")

    assert errors == []
    for page, said in ((teacher, teacher_csp), (learner, learner_csp)):
        assert _csp_reports(page) == [] and said == []
