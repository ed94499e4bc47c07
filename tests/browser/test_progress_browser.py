"""The tier line, the progress page and a leaderboard in a real browser against the real
server and executor: run a chapter's cell, read the tier line on its card, open /progress
from the nav, then the exercise's leaderboard from there."""

from __future__ import annotations

import re

import pytest

from tests.browser.test_playground import (  # noqa: F401 - the module's fixtures
    CELL,
    GOOD,
    RUN_LIMIT_MS,
    _card_id,
    _csp_reports,
    _replace_code,
    _shot,
    _wait_new_final_card,
    _watch_csp,
    browser,
    server,
)

pytestmark = pytest.mark.browser

CELL_ID = CELL.removeprefix("#cell-")


def test_run_a_cell_then_read_the_tier_progress_and_the_board(
    server: str,  # noqa: F811
    browser: object,  # noqa: F811
) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    csp_console = _watch_csp(page)

    page.goto(server + "/")
    page.click(f'.ch-cells li[data-cell="{CELL_ID}"] a')
    page.wait_for_selector(f"{CELL} .cm-editor")
    _replace_code(page, GOOD)
    before = _card_id(page, CELL)
    page.click(f"{CELL} [data-run]")
    _wait_new_final_card(page, CELL, before)
    card = page.locator(f"{CELL} [data-run-card]")
    assert "Correct" in card.locator(".verdict").inner_text(), card.inner_text()
    run_id = str(card.get_attribute("data-run-id"))

    # The card's tier line: a tier and what the next needs, or why no tier can be given.
    line = card.locator("[data-tier-line]")
    assert line.count() == 1, card.inner_text()
    kind, said = line.get_attribute("data-tier-line"), line.inner_text()
    result = page.request.get(f"{server}/api/v1/runs/{run_id}").json()["result"]
    if result.get("roofline") is None:
        assert kind == "none" and said.startswith("No tier: "), said
    else:
        assert kind in ("next", "reached"), said
        # "bronze reached: 55.3% of the memory roof ..." or, below the first tier,
        # "bronze: 50% of the memory roof needed — you are at 31.5%": how far the run got
        # depends on the machine, so either form is read.
        shown = re.search(r"(\d+\.\d)% of the (?:memory|\w+) roof", said) or re.search(
            r"you are at (\d+\.\d)%", said
        )
        assert shown, said
        percent = result["roofline"]["percent_of_roofline"]
        assert float(shown.group(1)) == pytest.approx(percent, abs=0.1), said
    line.scroll_into_view_if_needed()
    card.screenshot(path=_artifact("progress-card-tier.png"))

    # The nav's Progress: this cell's row, one attempt, the same state as the contents.
    page.click('.site-nav a[href="/progress"]')
    page.wait_for_url("**/progress")
    row = page.locator(f'tr[data-exercise="{CELL_ID}"]')
    assert row.get_attribute("data-attempts") == "1"
    assert row.locator(".progress-state").get_attribute("data-state") in ("correct", "tier")
    assert "no more than 30 minutes apart make one session" in page.inner_text("[data-counted-how]")
    others = page.eval_on_selector_all(
        "tr[data-exercise]", "rows => rows.map(r => r.dataset.attempts)"
    )
    assert sorted(others)[-1] == "1" and others.count("1") == 1  # only this reader's one run
    row.scroll_into_view_if_needed()
    _shot(page, "progress-page.png", full_page=False)

    # The exercise's board: this run is on it exactly when the engine verified it.
    row.locator('a[href^="/leaderboards/"]').click()
    page.wait_for_url("**/leaderboards/vector_add")
    assert run_id not in page.content() and "numba.njit" not in page.content()
    if result.get("verified"):
        mine = page.locator("tr[data-mine]")
        assert mine.count() == 1 and mine.get_attribute("data-rank") == "1"
        assert re.fullmatch(r"reader [0-9a-f]{6} \(you\)", mine.locator("th").inner_text())
    else:
        assert page.locator("[data-board-empty]").count() == 1
        assert page.locator("tr[data-rank]").count() == 0
    _shot(page, "leaderboard.png", full_page=False)
    assert errors == []
    assert _csp_reports(page) == [] and csp_console == []
    context.close()

    # Another reader's progress knows nothing of the run.
    stranger = browser.new_context(viewport={"width": 390, "height": 860})  # type: ignore[attr-defined]
    other = stranger.new_page()
    other.goto(server + "/progress")
    assert other.locator(f'tr[data-exercise="{CELL_ID}"]').get_attribute("data-attempts") == "0"
    _shot(other, "progress-stranger-phone.png", full_page=False)
    stranger.close()


def _artifact(name: str) -> str:
    from tests.browser.test_playground import ARTIFACTS

    ARTIFACTS.mkdir(exist_ok=True)
    return str(ARTIFACTS / name)
