"""The instructor's dashboard in a real browser, against the real server and its executor:
an instructor makes a cohort and an assignment, a learner joins and runs the exercise through
the API, the learner's heatmap cell changes on the open dashboard without a reload, the
instructor opens the learner's attempts and downloads the gradebook."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kplay.app.db.session import Database
from kplay.app.services.accounts import Accounts
from tests.browser.test_playground import (  # noqa: F401 - the module's fixtures
    ARTIFACTS,
    GOOD,
    RUN_LIMIT_MS,
    _csp_reports,
    _require_browser,
    _watch_csp,
    browser,
    running_server,
)

pytestmark = pytest.mark.browser

EXERCISE = "ch01-vadd-cpu"
PASSWORD = "a password long enough"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The server, and its database's URL (to give the instructor the instructor role)."""
    _require_browser()
    with running_server(tmp_path_factory.mktemp("dashboard-server")) as (url, database_url):
        yield url, database_url


def _sign_up(page: object, server: str, email: str, name: str) -> None:
    page.goto(server + "/signup")  # type: ignore[attr-defined]
    page.fill("#account-email", email)  # type: ignore[attr-defined]
    page.fill("#account-password", PASSWORD)  # type: ignore[attr-defined]
    page.fill("#account-display_name", name)  # type: ignore[attr-defined]
    page.click("[data-signup-form] button[type=submit]")  # type: ignore[attr-defined]
    page.wait_for_selector("[data-nav-account]")  # type: ignore[attr-defined]


def _shot(page: object, name: str, **kwargs: object) -> None:
    Path(ARTIFACTS).mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), **kwargs)  # type: ignore[attr-defined]


def instructor_with_cohort(teacher: object, server: str, database: str, name: str) -> str:
    """Prof Ada signed up on `teacher`, made an instructor, with cohort `name` and an
    assignment "Week 1" of EXERCISE; the cohort page's address."""
    _sign_up(teacher, server, "prof@example.org", "Prof Ada")
    db = Database(database)
    try:
        accounts = Accounts(db)
        found = accounts.by_email("prof@example.org")
        assert found is not None
        accounts.set_role(found.id, "instructor")
    finally:
        db.dispose()
    page: Any = teacher
    page.goto(server + "/cohorts")
    page.fill("#cohort-name", name)
    page.click("[data-cohort-form] button[type=submit]")
    page.wait_for_url(re.compile(r".*/cohorts/\d+$"))
    cohort_url = page.url
    page.fill("#assignment-title", "Week 1")
    page.check(f'[data-assignment-form] input[name="exercises"][value="{EXERCISE}"]')
    page.fill("#assignment-deadline", "2030-01-01T12:00")
    page.click("[data-assignment-form] button[type=submit]")
    page.wait_for_load_state()
    return str(cohort_url)


def test_the_heatmap_follows_a_learners_run_then_drill_down_and_export(
    site: tuple[str, str],
    browser: object,  # noqa: F811
) -> None:
    server, database = site
    teacher_ctx = browser.new_context(viewport={"width": 1366, "height": 900})  # type: ignore[attr-defined]
    teacher = teacher_ctx.new_page()
    errors: list[str] = []
    teacher.on("pageerror", lambda exc: errors.append(str(exc)))
    csp_console = _watch_csp(teacher)

    # The instructor: an account given the instructor role, a cohort, an assignment.
    cohort_url = instructor_with_cohort(teacher, server, database, "Kernels 101")
    assert teacher.locator("[data-cohort-error]").count() == 0, teacher.content()[:2000]
    teacher.goto(cohort_url)
    assert "Week 1" in teacher.inner_text("main")
    join_url = teacher.input_value("[data-join-url]")
    assert "/join/" in join_url

    # The learner joins before the dashboard is opened: a row is made for each learner.
    learner_ctx = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    learner = learner_ctx.new_page()
    _sign_up(learner, server, "lea@example.org", "Lea Learner")
    learner.goto(join_url)
    learner.click("[data-join-link-form] button[type=submit]")
    learner.wait_for_load_state()

    teacher.goto(cohort_url + "/dashboard")
    row = teacher.locator("tr[data-learner]")
    assert row.count() == 1 and "Lea Learner" in row.inner_text()
    learner_id = row.get_attribute("data-learner")
    cell = teacher.locator(f"#c{learner_id}-0")
    assert cell.get_attribute("data-state") == "untried"
    teacher.evaluate("window.__sameDocument = true")
    _shot(teacher, "dashboard-before.png", full_page=True)

    # The learner's run, through the API and the server's own executor.
    made = learner.request.post(
        server + "/api/v1/runs",
        data={"problem": "vector_add", "backend": "numba-cpu", "source": GOOD, "cell": EXERCISE},
    )
    assert made.status in (200, 201, 202), made.text()
    run_id = made.json()["id"]

    # The cell changes on the open page, polled, without a reload.
    teacher.wait_for_function(
        """sel => {
            const td = document.querySelector(sel);
            return td && (td.dataset.state === 'correct' || td.dataset.state === 'tier');
        }""",
        arg=f"#c{learner_id}-0",
        timeout=RUN_LIMIT_MS,
    )
    assert teacher.evaluate("window.__sameDocument === true")
    teacher.wait_for_function(f"document.querySelector('#s{learner_id}').textContent === '1'")
    assert "(1 run, 0 failed)" in teacher.locator(f"#c{learner_id}-0").get_attribute("title")
    _shot(teacher, "dashboard-after-run.png", full_page=True)

    # Drill down: the learner's attempts, with the run and a link to its card.
    teacher.click(f'tr[data-learner="{learner_id}"] th a')
    teacher.wait_for_url(f"**/learners/{learner_id}")
    attempt = teacher.locator(f'[data-attempt="{run_id}"]')
    assert attempt.count() == 1 and attempt.get_attribute("data-state") == "done"
    assert attempt.locator("[data-run-link]").get_attribute("href") == f"/runs/{run_id}/card"
    _shot(teacher, "dashboard-learner.png", full_page=True)

    # The gradebook, downloaded.
    teacher.go_back()
    with teacher.expect_download() as waiting:
        teacher.click("[data-gradebook]")
    download = waiting.value
    text = Path(download.path()).read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][:3] == ["learner", "email", f"{EXERCISE} state"]
    assert rows[1][:2] == ["Lea Learner", "lea@example.org"]
    assert rows[1][2] in ("correct", "tier")
    (ARTIFACTS / "dashboard-gradebook.csv").write_text(text, encoding="utf-8")

    # A learner does not see the dashboard.
    refused = learner.goto(cohort_url + "/dashboard")
    assert refused is not None and refused.status == 404
    assert errors == [] and _csp_reports(teacher) == [] and csp_console == []
    teacher_ctx.close()
    learner_ctx.close()
