"""The run card in a real browser, live: it walks through the run's states as they happen
(over the event stream, without polling), shows a determinate bar while timing, and still
gets there by polling where the browser has no EventSource."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.test_playground import (  # noqa: F401 - the module's fixtures
    CELL,
    GOOD,
    _card_id,
    _csp_reports,
    _replace_code,
    _wait_new_final_card,
    _watch_csp,
    browser,
    server,
)

pytestmark = pytest.mark.browser

SHOT = Path("/tmp/kplay-card-timing.png")
RANK = {"queued": 0, "compiling": 1, "checking": 2, "timing": 3}

# Every card that enters the page and every move of the timing bar, kept on the window.
RECORD = """
window.__cards = [];
window.__bar = [];
new MutationObserver(function (records) {
  records.forEach(function (r) {
    if (r.type === "attributes") {
      if (r.target.matches("[data-timing-bar]")) {
        window.__bar.push(Number(r.target.getAttribute("aria-valuenow")));
      }
      return;
    }
    r.addedNodes.forEach(function (n) {
      if (n.nodeType === 1 && n.matches("[data-run-card]")) {
        var d = n.dataset;
        window.__cards.push({id: d.runId, state: d.state, via: d.via || ""});
      }
    });
  });
}).observe(document, {subtree: true, childList: true, attributes: true,
                      attributeFilter: ["aria-valuenow"]});
"""


def _run_once(page: object) -> str:
    page.wait_for_selector(f"{CELL} .cm-editor")  # type: ignore[attr-defined]
    _replace_code(page, GOOD)
    before = _card_id(page, CELL)
    page.keyboard.press("Control+Enter")  # type: ignore[attr-defined]
    return before or ""


def test_the_card_walks_through_the_states_as_they_happen(server: str, browser: object) -> None:  # noqa: F811
    from playwright.sync_api import Error as PlaywrightError

    context = browser.new_context(viewport={"width": 1366, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    asked: list[str] = []
    page.on("request", lambda req: asked.append(req.url))
    csp_console = _watch_csp(page)
    page.add_init_script(RECORD)
    page.goto(f"{server}/book/p1/first-kernel-cpu")
    before = _run_once(page)
    bar = page.wait_for_selector(f"{CELL} [data-timing-bar]", timeout=240_000)
    assert bar is not None and bar.get_attribute("role") == "progressbar"
    try:  # the timing phase is short: the card may be final before the picture is taken
        page.locator(f"{CELL} [data-run-card]").screenshot(path=str(SHOT), timeout=2_000)
    except PlaywrightError:
        pass
    _wait_new_final_card(page, CELL, before)

    card = page.locator(f"{CELL} [data-run-card]")
    run_id = card.get_attribute("data-run-id")
    assert "Correct" in page.locator(f"{CELL} .verdict").inner_text()
    cards = [c for c in page.evaluate("window.__cards") if c["id"] == run_id]
    states = [c["state"] for c in cards]
    assert states[-1] == "done" and {"compiling", "checking", "timing"} <= set(states), states
    ranks = [RANK.get(s, 4) for s in states]
    assert ranks == sorted(ranks), states
    # Once the stream was open every change came over it (a card polled before it opened,
    # on a busy machine, is the fallback at work), the verdict included.
    vias = [c["via"] for c in cards]
    assert "stream" in vias and set(vias[vias.index("stream") :]) == {"stream"}, cards
    assert any(f"/api/v1/runs/{run_id}/events" in url for url in asked)
    # The bar only went forward, and was full when the verdict came.
    values = page.evaluate("window.__bar")
    assert values and values == sorted(values) and values[-1] == 100, values
    assert errors == [] and _csp_reports(page) == [] and csp_console == []
    context.close()


def test_without_event_source_the_card_polls_to_its_verdict(server: str, browser: object) -> None:  # noqa: F811
    context = browser.new_context(viewport={"width": 1366, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    asked: list[str] = []
    page.on("request", lambda req: asked.append(req.url))
    page.add_init_script("delete window.EventSource;")
    page.goto(f"{server}/book/p1/first-kernel-cpu")
    before = _run_once(page)
    _wait_new_final_card(page, CELL, before)
    run_id = page.locator(f"{CELL} [data-run-card]").get_attribute("data-run-id")
    assert "Correct" in page.locator(f"{CELL} .verdict").inner_text()
    assert any(f"/runs/{run_id}/card" in url for url in asked)
    assert not any("/events" in url for url in asked)
    context.close()
