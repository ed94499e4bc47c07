"""Share and compare in a real browser, against the real server and its real executor: the owner
runs a kernel and shares it; a second reader (another browser context, so another session
cookie) opens the link read-only, at a phone's width and a desktop's, forks it into the cell
and runs it as their own; the owner compares two attempts from the cell's history.

Pictures go to $TEST_ARTIFACTS_DIR/sharing when it is set, otherwise to a folder under
pytest's temporary path."""

from __future__ import annotations

import os
from collections.abc import Iterator
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
from tests.browser.test_widths import HEIGHT, OVERFLOW, SCHEMES, WIDTHS, _too_wide

pytestmark = pytest.mark.browser

CHAPTER = "/book/p1/first-kernel-cpu"
# The second attempt differs from the first by one line: the comparison's diff shows it.
# Everything the shared card folds away, opened: logs, tables.
OPEN_ALL = "document.querySelectorAll('.shared-page details').forEach(d => d.open = true)"
SECOND = GOOD.replace("def vector_add", "# the same loop, attempt two\ndef vector_add")


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    configured = os.environ.get("TEST_ARTIFACTS_DIR")
    folder = Path(configured) / "sharing" if configured else tmp_path_factory.mktemp("sharing")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _run(page: object, code: str) -> str:
    """Type `code` into the cell, run it, wait for its verdict; the new card's run id."""
    _replace_code(page, code)
    before = _card_id(page, CELL)
    page.click(f"{CELL} [data-run]")  # type: ignore[attr-defined]
    _wait_new_final_card(page, CELL, before)
    run_id = _card_id(page, CELL)
    assert run_id and run_id != before
    return run_id


def _headline(page: object, scope: str) -> list[str]:
    return [
        " ".join(t.split())
        for t in page.locator(f"{scope} .run-headline .metric").all_inner_texts()  # type: ignore[attr-defined]
    ]


@pytest.fixture(scope="module")
def owner(server: str, browser: object) -> Iterator[dict[str, object]]:  # noqa: F811
    """The owner's tab: one run, finished and shared; its link and its numbers."""
    context = browser.new_context(viewport={"width": 1280, "height": HEIGHT})  # type: ignore[attr-defined]
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(server + CHAPTER)
    page.wait_for_selector(f"{CELL} .cm-editor")
    run_id = _run(page, GOOD)
    assert "Correct" in page.locator(f"{CELL} .verdict").inner_text()
    page.click(f"{CELL} [data-share-run]")
    link = page.wait_for_selector(f"{CELL} [data-share-url]", timeout=10_000)
    assert link is not None
    url = link.get_attribute("value") or ""
    assert url.startswith(server + "/shared/")
    yield {
        "page": page,
        "run_id": run_id,
        "url": url,
        "numbers": _headline(page, CELL),
        "errors": errors,
    }
    context.close()


def test_the_owner_shares_a_run(owner: dict[str, object], artifacts: Path) -> None:
    page = owner["page"]
    card = page.locator(f"{CELL} [data-run-card]")  # type: ignore[attr-defined]
    assert "Anyone with this link" in card.inner_text()
    # Sharing again gives the same link.
    page.reload()  # type: ignore[attr-defined]
    page.wait_for_selector(f"{CELL} .cm-editor")  # type: ignore[attr-defined]
    page.click(f"{CELL} [data-share-run]")  # type: ignore[attr-defined]
    again = page.wait_for_selector(f"{CELL} [data-share-url]")  # type: ignore[attr-defined]
    assert again.get_attribute("value") == owner["url"]
    card.screenshot(path=str(artifacts / "share-card.png"))
    assert owner["errors"] == []


def test_another_reader_opens_the_link_read_only(
    owner: dict[str, object],
    browser: object,  # noqa: F811
    artifacts: Path,
) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": HEIGHT})  # type: ignore[attr-defined]
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    csp_console = _watch_csp(page)
    page.goto(str(owner["url"]))
    assert "Correct" in page.locator(".shared-page .verdict").inner_text()
    assert _headline(page, ".shared-page") == owner["numbers"]
    assert "out[i] = a[i] + b[i]" in page.locator("[data-shared-source]").inner_text()
    page.wait_for_selector(".shared-page .roofline-chart svg .kp-rl-point.is-current")
    for owner_only in ("[data-share-run]", "[data-run-form]", ".cm-editor", "[data-history]"):
        assert page.locator(owner_only).count() == 0, owner_only
    wide = []
    for width in WIDTHS:
        for scheme in SCHEMES:
            page.set_viewport_size({"width": width, "height": HEIGHT})
            page.emulate_media(color_scheme=scheme)
            page.reload()
            page.wait_for_selector(".shared-page .roofline-chart svg")
            page.evaluate(
                "document.querySelectorAll('.shared-page details').forEach(d => d.open = true)"
            )
            problem = _too_wide(f"the shared page, {width} px {scheme}", page.evaluate(OVERFLOW))
            if problem:
                wide.append(problem)
            page.screenshot(path=str(artifacts / f"shared-{width}-{scheme}.png"), full_page=True)
    assert not wide, "the shared page is wider than the window:\n" + "\n".join(wide)
    missing = page.goto(str(owner["url"])[:-4] + "zzzz")
    assert missing is not None and missing.status == 404
    assert "There is no shared run at this link" in page.locator(".error-message").inner_text()
    assert errors == [] and _csp_reports(page) == [] and csp_console == []
    context.close()


def test_the_fork_runs_as_the_other_readers_own(
    owner: dict[str, object],
    browser: object,  # noqa: F811
    artifacts: Path,
) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": HEIGHT})  # type: ignore[attr-defined]
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(str(owner["url"]))
    page.click("[data-fork]")
    page.wait_for_selector(f"{CELL} .cm-editor")
    page.wait_for_function(
        "sel => document.querySelector(sel).innerText.includes('out[i] = a[i] + b[i]')",
        arg=f"{CELL} .cm-content",
    )
    # The starter may hold that line too: the fork is done when the cell says so.
    page.wait_for_function(
        "sel => document.querySelector(sel).innerText.includes('Loaded the shared run')",
        arg=f"{CELL} [data-status]",
    )
    assert "fork=" not in page.url and page.url.endswith("#cell-ch01-vadd-cpu")
    # The fork's cell had nothing of this reader's: no card, no attempts.
    assert _card_id(page, CELL) is None
    page.click(f"{CELL} [data-run]")
    _wait_new_final_card(page, CELL, None)
    forked = _card_id(page, CELL)
    assert forked and forked != owner["run_id"]
    assert "Correct" in page.locator(f"{CELL} .verdict").inner_text()
    page.wait_for_selector(f"{CELL} [data-history-box]")
    assert page.locator(f"{CELL} .attempt").count() == 1  # the reader's own history
    page.locator(CELL).screenshot(path=str(artifacts / "forked-cell.png"))
    # The fork is this reader's run: the owner cannot read it, this reader can.
    mine = page.evaluate(f"fetch('/api/v1/runs/{forked}').then(r => r.status)")
    theirs = owner["page"].evaluate(f"fetch('/api/v1/runs/{forked}').then(r => r.status)")  # type: ignore[attr-defined]
    assert (mine, theirs) == (200, 404)
    assert errors == []
    context.close()


def test_the_owner_compares_two_attempts(owner: dict[str, object], artifacts: Path) -> None:
    page = owner["page"]
    page.goto(page.url.split("#")[0])  # type: ignore[attr-defined]
    page.wait_for_selector(f"{CELL} .cm-editor")  # type: ignore[attr-defined]
    second = _run(page, SECOND)
    page.click(f"{CELL} [data-history-box] > summary")  # type: ignore[attr-defined]
    page.wait_for_selector(f'{CELL} [data-compare-pick][value="{second}"]')  # type: ignore[attr-defined]
    page.check(f'{CELL} [data-compare-pick][value="{owner["run_id"]}"]')  # type: ignore[attr-defined]
    page.check(f'{CELL} [data-compare-pick][value="{second}"]')  # type: ignore[attr-defined]
    page.click(f"{CELL} [data-compare-submit]")  # type: ignore[attr-defined]
    box = page.wait_for_selector(f"{CELL} [data-comparison]")  # type: ignore[attr-defined]
    page.wait_for_selector(f"{CELL} [data-comparison] .roofline-chart svg")  # type: ignore[attr-defined]
    text = box.inner_text()
    assert "Attempt #1 and attempt #2" in text and "Median time" in text
    assert "+# the same loop, attempt two" in text
    points = page.locator(f"{CELL} [data-comparison] .kp-rl-point")  # type: ignore[attr-defined]
    assert points.count() == 2
    wide = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": HEIGHT})  # type: ignore[attr-defined]
        found = page.evaluate(OVERFLOW)  # type: ignore[attr-defined]
        problem = _too_wide(f"{CHAPTER} with a comparison, {width} px", found)
        if problem:
            wide.append(problem)
        history = page.locator(f"{CELL} [data-history]")  # type: ignore[attr-defined]
        history.screenshot(path=str(artifacts / f"compare-{width}.png"))
    assert not wide, "the comparison widens the page:\n" + "\n".join(wide)
    assert owner["errors"] == []
