"""Learners who join a cohort while its instructor's dashboard is open, in a real browser
against the real server: the empty heatmap gains a row for the first learner who joins, then
one for the next, without a reload; the new learner's run then changes its cell in place."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.browser.test_dashboard_browser import (
    EXERCISE,
    _shot,
    _sign_up,
    instructor_with_cohort,
)
from tests.browser.test_playground import (  # noqa: F401 - the module's fixtures
    GOOD,
    RUN_LIMIT_MS,
    _csp_reports,
    _require_browser,
    _watch_csp,
    browser,
    running_server,
)

pytestmark = pytest.mark.browser

POLL_MS = 20_000  # a few of the page's 5 s polls


@pytest.fixture(scope="module")
def joins_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    _require_browser()
    with running_server(tmp_path_factory.mktemp("dashboard-joins-server")) as (url, database):
        yield url, database


def _join(chromium: object, server: str, join_url: str, email: str, name: str) -> object:
    ctx = chromium.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    page = ctx.new_page()
    _sign_up(page, server, email, name)
    page.goto(join_url)
    page.click("[data-join-link-form] button[type=submit]")
    page.wait_for_load_state()
    return page


def test_learners_who_join_appear_on_the_open_dashboard(
    joins_site: tuple[str, str],
    browser: object,  # noqa: F811
) -> None:
    server, database = joins_site
    teacher_ctx = browser.new_context(viewport={"width": 1366, "height": 900})  # type: ignore[attr-defined]
    teacher = teacher_ctx.new_page()
    errors: list[str] = []
    teacher.on("pageerror", lambda exc: errors.append(str(exc)))
    csp_console = _watch_csp(teacher)
    cohort_url = instructor_with_cohort(teacher, server, database, "Kernels 102")
    teacher.goto(cohort_url)
    join_url = teacher.input_value("[data-join-url]")

    # The dashboard, open before anyone joined.
    teacher.goto(cohort_url + "/dashboard")
    assert "No learner has joined yet." in teacher.inner_text("#dash-heat")
    teacher.evaluate("window.__sameDocument = true")

    lea = _join(browser, server, join_url, "lea@example.org", "Lea Learner")
    teacher.wait_for_selector("tr[data-learner]", timeout=POLL_MS)
    rows = teacher.locator("tr[data-learner]")
    assert rows.count() == 1 and "Lea Learner" in rows.inner_text()
    _join(browser, server, join_url, "max@example.org", "Max Learner")
    teacher.wait_for_function(
        "n => document.querySelectorAll('tr[data-learner]').length === n",
        arg=2,
        timeout=POLL_MS,
    )
    names = teacher.locator("tr[data-learner] th").all_inner_texts()
    assert names == ["Lea Learner", "Max Learner"]
    assert teacher.evaluate("window.__sameDocument === true")
    lea_id = teacher.locator("tr[data-learner]").first.get_attribute("data-learner")
    assert teacher.locator(f"#c{lea_id}-0").get_attribute("data-state") == "untried"
    assert "2 learners" in teacher.inner_text("#dash-tally")

    # The newcomer's run reaches its new cell like any other.
    made = lea.request.post(  # type: ignore[attr-defined]
        server + "/api/v1/runs",
        data={"problem": "vector_add", "backend": "numba-cpu", "source": GOOD, "cell": EXERCISE},
    )
    assert made.status in (200, 201, 202), made.text()
    teacher.wait_for_function(
        """sel => {
            const td = document.querySelector(sel);
            return td && (td.dataset.state === 'correct' || td.dataset.state === 'tier');
        }""",
        arg=f"#c{lea_id}-0",
        timeout=RUN_LIMIT_MS + POLL_MS,
    )
    assert teacher.locator("tr[data-learner]").count() == 2
    assert teacher.evaluate("window.__sameDocument === true")
    _shot(teacher, "dashboard-joins.png", full_page=True)
    assert errors == [] and _csp_reports(teacher) == [] and csp_console == []
    teacher_ctx.close()
