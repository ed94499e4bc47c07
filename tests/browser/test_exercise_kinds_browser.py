"""The exercise kinds in a real browser against the real server and executor: predict, then
run a triad on this machine's CPU and read the grade; answer a stored profile's questions."""

from __future__ import annotations

import sys

import pytest

from tests.browser.test_playground import (  # noqa: F401 - the module's fixtures
    ARTIFACTS,
    RUN_LIMIT_MS,
    _card_id,
    _csp_reports,
    _watch_csp,
    browser,
    server,
)

pytestmark = pytest.mark.browser

PREDICT = "#cell-ch03-triad-predict"
READ = "#cell-p3-read-profile-rung7"
TRIAD = """import numba


@numba.njit(parallel=True, fastmath=True)
def triad(a, b, c, s, n):
    for i in numba.prange(n):
        a[i] = b[i] + s * c[i]
"""


def _shot(target: object, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    target.screenshot(path=str(ARTIFACTS / name))  # type: ignore[attr-defined]


def _replace_code(page: object, cell: str, code: str) -> None:
    page.locator(f"{cell} .cm-content").click()  # type: ignore[attr-defined]
    mod = "Meta" if sys.platform == "darwin" else "Control"
    page.keyboard.press(f"{mod}+a")  # type: ignore[attr-defined]
    page.keyboard.press("Delete")  # type: ignore[attr-defined]
    page.keyboard.insert_text(code)  # type: ignore[attr-defined]


def test_predict_then_run_grades_the_prediction_against_the_card(
    server: str,  # noqa: F811
    browser: object,  # noqa: F811
) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    csp_console = _watch_csp(page)
    page.goto(f"{server}/book/p1/roofline")
    page.wait_for_selector(f"{PREDICT} .cm-editor")
    intro = page.locator(f"{PREDICT} [data-exercise='predict']")
    assert "What share of the memory roof" in intro.inner_text()
    assert "within 15 percentage points counts" in intro.inner_text()
    assert "No prediction yet" in page.locator(f"{PREDICT} [data-exercise-slot]").inner_text()

    # Run with no prediction: refused in words, nothing stored.
    _replace_code(page, PREDICT, TRIAD)
    page.click(f"{PREDICT} [data-run]")
    page.wait_for_selector(f"{PREDICT} [data-input-error]")
    said = page.locator(f"{PREDICT} [data-card-slot]").inner_text()
    assert "write your prediction before you run" in said

    page.fill(f"{PREDICT} input[name=prediction]", "40")
    assert _card_id(page, PREDICT) is None  # the refusal's card, of no run
    page.click(f"{PREDICT} [data-run]")
    page.wait_for_function(
        """sel => {
            const card = document.querySelector(sel + ' [data-run-card]');
            return card && card.dataset.runId && card.dataset.final === 'true';
        }""",
        arg=PREDICT,
        timeout=RUN_LIMIT_MS,
    )
    card = page.locator(f"{PREDICT} [data-run-card]")
    assert "Correct" in card.locator(".verdict").inner_text(), card.inner_text()
    run_id = str(card.get_attribute("data-run-id"))

    # The panel follows the card to its end: the prediction, locked, against the measurement.
    slot = f"{PREDICT} [data-exercise-slot]"
    page.wait_for_selector(f"{slot} [data-within], {slot} [data-grade-note]", timeout=30_000)
    panel = page.locator(slot)
    assert panel.locator("[data-predicted]").inner_text().startswith("40 %")
    assert "(locked)" in panel.inner_text()
    state = page.request.get(f"{server}/api/v1/cells/ch03-triad-predict/exercise").json()["state"]
    assert state["run"] == run_id and state["locked"] is True
    result = page.request.get(f"{server}/api/v1/runs/{run_id}").json()["result"]
    if result.get("roofline") is None:
        assert state["within_tolerance"] is None and state["note"]
    else:
        percent = result["roofline"]["percent_of_roofline"]
        assert state["within_tolerance"] is (abs(40 - percent) <= 15)
        within = panel.locator("[data-within]").get_attribute("data-within")
        assert within == ("true" if state["within_tolerance"] else "false")
    panel.scroll_into_view_if_needed()
    _shot(page.locator(PREDICT), "exercise-predict-graded.png")

    # The stored prediction cannot change now that its run has started.
    late = page.request.put(
        f"{server}/api/v1/predictions/{state['prediction']}", data={"value": "99"}
    )
    assert late.status == 409
    assert errors == [] and csp_console == [] and _csp_reports(page) == []
    context.close()


def test_a_stored_profile_is_read_and_its_answers_graded(
    server: str,  # noqa: F811
    browser: object,  # noqa: F811
) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    csp_console = _watch_csp(page)
    page.goto(f"{server}/book/p3/profiling")
    cell = page.locator(READ)
    cell.locator(".profile-panel").wait_for()
    assert "sgemm" in cell.locator(".profile-launch").inner_text()
    assert cell.locator(".ex-q").count() == 5

    cell.locator("select[name=q1]").select_option("Compute (SM) Throughput")
    cell.locator("select[name=q2]").select_option("not_selected")
    cell.locator("input[name=q3]").fill("11.6")
    cell.locator("input[name=q4]").fill("700")
    cell.locator("input[name=q5]").fill("290")  # one line off
    cell.locator("[data-check-answers]").click()
    page.wait_for_selector(f"{READ} [data-score]")
    score = cell.locator("[data-score]")
    assert score.get_attribute("data-score") == "4" and score.get_attribute("data-total") == "5"
    assert cell.locator('[data-mark="q5"]').get_attribute("data-correct") == "false"
    assert cell.locator('[data-mark="q3"]').get_attribute("data-correct") == "true"
    cell.locator(".ex-questions").scroll_into_view_if_needed()
    _shot(cell.locator("[data-exercise='profile']"), "exercise-profile-graded.png")

    cell.locator("input[name=q5]").fill("289")
    cell.locator("[data-check-answers]").click()
    page.wait_for_function(
        "sel => document.querySelector(sel + ' [data-score]')?.dataset.score === '5'",
        arg=READ,
    )
    assert "the profile is read" in cell.locator("[data-exercise-slot]").inner_text()
    assert errors == [] and csp_console == [] and _csp_reports(page) == []
    context.close()
