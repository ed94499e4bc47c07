"""The problem catalog in a real browser against the real server and executor: list every
problem, open one from the list, run a kernel for it, and find the reader's state on the
catalog and the contents (and another reader's untouched)."""

from __future__ import annotations

import re
import sys

import pytest

from tests.browser.test_playground import (  # noqa: F401 - the module's fixtures
    ARTIFACTS,
    RUN_LIMIT_MS,
    _card_id,
    _csp_reports,
    _shot,
    _wait_new_final_card,
    _watch_csp,
    browser,
    server,
)

pytestmark = pytest.mark.browser

# A problem that runs on a CPU; no chapter embeds it today, so its page gives it a cell of
# its own (were a chapter to embed it, the page would show that chapter's cell instead).
SLUG = "softmax"
BACKEND = "numba-cpu"
STATES = "marks => marks.map(m => m.dataset.state)"


def _solution() -> str:
    from kplay.kernels.catalog import load_catalog

    spec = load_catalog()[SLUG]
    return next(p.read_text() for b, p in spec.solutions("correct") if b == BACKEND)


def _type_kernel(page: object, cell: str, code: str) -> None:
    page.locator(f"{cell} .cm-content").click()  # type: ignore[attr-defined]
    mod = "Meta" if sys.platform == "darwin" else "Control"
    page.keyboard.press(f"{mod}+a")  # type: ignore[attr-defined]
    page.keyboard.press("Delete")  # type: ignore[attr-defined]
    page.keyboard.insert_text(code)  # type: ignore[attr-defined]


def _state_of(page: object, selector: str) -> str:
    mark = page.locator(f"{selector} .progress-state").first  # type: ignore[attr-defined]
    return str(mark.get_attribute("data-state"))


def test_open_a_problem_from_the_catalog_run_it_and_see_the_state(
    server: str,  # noqa: F811
    browser: object,  # noqa: F811
) -> None:
    from kplay.kernels.catalog import load_catalog

    context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    csp_console = _watch_csp(page)

    page.goto(server + "/")
    page.click('.site-nav a[href="/problems"]')
    page.wait_for_url("**/problems")
    assert page.locator(".problem-entry").count() == len(load_catalog())
    entry = f"#problem-{SLUG}"
    assert _state_of(page, entry) == "untried"
    _shot(page, "catalog-list.png", full_page=False)

    page.click(f"{entry} h3 a")
    page.wait_for_url(f"**/problems/{SLUG}")
    cell = "#" + str(page.locator(".kcell").first.get_attribute("id"))
    page.wait_for_selector(f"{cell} .cm-editor")
    assert _state_of(page, ".chapter-head") == "untried"
    page.click(f'{cell} .kcell-tab[data-backend="{BACKEND}"]')
    _type_kernel(page, cell, _solution())
    before = _card_id(page, cell)
    page.keyboard.press("Control+Enter")
    _wait_new_final_card(page, cell, before)
    verdict = page.locator(f"{cell} .verdict").inner_text()
    assert "Correct" in verdict, page.locator(f"{cell} [data-run-card]").inner_text()
    page.wait_for_selector(f"{cell} [data-history-box]", timeout=RUN_LIMIT_MS)
    page.locator(f"{cell} .kcell-result").scroll_into_view_if_needed()
    _shot(page, "catalog-problem-run.png", full_page=False)

    # The page said "not tried" when it opened; opened again, it knows the run.
    page.reload()
    assert _state_of(page, ".chapter-head") in ("correct", "tier")
    page.goto(server + "/problems")
    assert _state_of(page, entry) in ("correct", "tier")
    tally = page.locator("[data-tally]").inner_text()
    assert re.search(r"a correct run for 1\b", tally), tally
    page.locator(entry).scroll_into_view_if_needed()
    _shot(page, "catalog-after-run.png", full_page=False)
    page.click("[data-theme-toggle]")
    page.locator(entry).screenshot(path=str(ARTIFACTS / "catalog-entry-dark.png"))

    # The run belongs to a chapter's cell only if a chapter embeds the problem.
    cell_id = cell.removeprefix("#cell-")
    page.goto(server + "/")
    in_toc = page.locator(f'.ch-cells li[data-cell="{cell_id}"]')
    if cell_id.startswith("problem-"):
        assert in_toc.count() == 0
    else:
        assert _state_of(page, f'.ch-cells li[data-cell="{cell_id}"]') in ("correct", "tier")
    states = page.eval_on_selector_all(".ch-cells .progress-state", STATES)
    assert states and set(states) <= {"untried", "correct", "tier"}
    _shot(page, "catalog-contents.png", full_page=False)
    assert errors == []
    assert _csp_reports(page) == [] and csp_console == []
    context.close()

    stranger = browser.new_context(viewport={"width": 390, "height": 860})  # type: ignore[attr-defined]
    other = stranger.new_page()
    other.goto(server + "/problems")
    assert _state_of(other, entry) == "untried"
    states = other.eval_on_selector_all(".progress-state", STATES)
    assert states and set(states) == {"untried"}
    _shot(other, "catalog-stranger-phone.png", full_page=False)
    other.goto(f"{server}/problems/{SLUG}")
    assert other.locator(".run-empty").count() == 1
    stranger.close()
