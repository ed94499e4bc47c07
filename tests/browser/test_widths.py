"""Every page at a phone's width and a desktop's, in the light and the dark theme: the page
itself never scrolls sideways (wide tables, code and charts scroll inside their own box).

Full-page pictures of every chapter go to $TEST_ARTIFACTS_DIR when it is set, otherwise to
a folder under pytest's temporary path."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.test_playground import (  # noqa: F401 - the module's fixtures
    CELL,
    GOOD,
    _card_id,
    _replace_code,
    _wait_new_final_card,
    browser,
    server,
)

pytestmark = pytest.mark.browser

WIDTHS = (390, 1280)
SCHEMES = ("light", "dark")
HEIGHT = 860
RUN_CHAPTER = "/book/p1/first-kernel-cpu"

# The page's horizontal overflow, and the outermost boxes that cause it: those that stick out
# past the viewport while their parent does not, with no scrolling box around them.
OVERFLOW = """() => {
  const width = window.innerWidth;
  const culprits = [];
  for (const el of document.body.querySelectorAll('*')) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.right <= width + 1) continue;
    const parent = el.parentElement;
    if (parent && parent !== document.body && parent.getBoundingClientRect().right > width + 1) {
      continue;
    }
    let scrolled = false;
    for (let a = parent; a && a !== document.body; a = a.parentElement) {
      if (getComputedStyle(a).overflowX !== 'visible') { scrolled = true; break; }
    }
    if (scrolled) continue;
    const name = el.tagName.toLowerCase() + (el.className && typeof el.className === 'string'
      ? '.' + el.className.trim().split(/\\s+/).join('.') : '');
    const text = (el.innerText || el.textContent || '').replace(/\\s+/g, ' ').trim().slice(0, 60);
    culprits.push(`${name} to ${Math.round(box.right)} px: ${text}`);
  }
  return {
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: width,
    culprits: culprits.slice(0, 5),
  };
}"""

# Every editor of the page is mounted (or fell back to its text area).
EDITORS_READY = """() => [...document.querySelectorAll('[data-editor]')].every(
  e => e.querySelector('.cm-editor, textarea'))"""


def _chapter_urls() -> list[str]:
    from kplay.app.book import Book
    from kplay.config import Settings
    from kplay.kernels.catalog import load_catalog

    return [chapter.url for chapter in Book(Settings().book_dir, load_catalog()).chapters()]


CHAPTERS = _chapter_urls()
PROBLEM_PAGES = ["/problems", "/problems/gemm_blocktile_2d"]
PAGES = ["/", *CHAPTERS, *PROBLEM_PAGES, "/fleet", "/docs", "/search?q=shared+memory"]
# A shared link that names no run (a real shared run's page: tests/browser/test_share_links.py).
PAGES.append("/shared/" + "0" * 32)
# A source file, opened at a line (its wide lines scroll inside the code box), and a folder the
# source view refuses with the list of its files.
PAGES += ["/source/kernels/check.py#L42", "/source/kernels/problems/sgemm"]


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    configured = os.environ.get("TEST_ARTIFACTS_DIR")
    folder = Path(configured) / "widths" if configured else tmp_path_factory.mktemp("widths")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def visitor(server: str, browser: object) -> Iterator[dict[str, object]]:  # noqa: F811
    """One browser context for the module: a tab that runs a kernel in the background (its
    card is checked last) and a tab that walks through the pages."""
    context = browser.new_context(viewport={"width": 1280, "height": HEIGHT})  # type: ignore[attr-defined]
    runner = context.new_page()
    runner.goto(server + RUN_CHAPTER)
    runner.wait_for_selector(f"{CELL} .cm-editor")
    _replace_code(runner, GOOD)
    before = _card_id(runner, CELL)
    runner.keyboard.press("Control+Enter")
    reader = context.new_page()
    errors: list[str] = []
    reader.on("pageerror", lambda exc: errors.append(str(exc)))
    yield {"runner": runner, "reader": reader, "before": before, "errors": errors}
    context.close()


def _fit(page: object, width: int, scheme: str) -> None:
    page.set_viewport_size({"width": width, "height": HEIGHT})  # type: ignore[attr-defined]
    page.emulate_media(color_scheme=scheme)  # type: ignore[attr-defined]


def _visit(page: object, url: str, scheme: str) -> dict[str, object]:
    page.goto(url, wait_until="load")  # type: ignore[attr-defined]
    page.wait_for_function(EDITORS_READY, timeout=15_000)  # type: ignore[attr-defined]
    theme = page.evaluate("document.documentElement.dataset.theme")  # type: ignore[attr-defined]
    assert theme == scheme, f"{url}: the page chose the {theme} theme"
    return dict(page.evaluate(OVERFLOW))  # type: ignore[attr-defined]


def _too_wide(path: str, found: dict[str, object]) -> str | None:
    if int(found["scrollWidth"]) <= int(found["innerWidth"]) + 1:  # type: ignore[call-overload]
        return None
    lines = [f"{path}: {found['scrollWidth']} px wide in a {found['innerWidth']} px window"]
    lines += [f"    {c}" for c in found["culprits"]]  # type: ignore[attr-defined]
    return "\n".join(lines)


def _picture_name(path: str, width: int, scheme: str) -> str:
    stem = path.strip("/").replace("/", "-") or "contents"
    return f"{stem}-{width}-{scheme}.png"


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("width", WIDTHS)
def test_no_page_scrolls_sideways(
    server: str,  # noqa: F811
    visitor: dict[str, object],
    artifacts: Path,
    width: int,
    scheme: str,
) -> None:
    page = visitor["reader"]
    _fit(page, width, scheme)
    wide: list[str] = []
    for path in PAGES:
        problem = _too_wide(path, _visit(page, server + path, scheme))
        if problem:
            wide.append(problem)
        if path in CHAPTERS or path in PROBLEM_PAGES:
            shot = artifacts / _picture_name(path, width, scheme)
            page.screenshot(path=str(shot), full_page=True)  # type: ignore[attr-defined]
    assert not wide, "pages wider than the window:\n" + "\n".join(wide)
    assert visitor["errors"] == []


def test_the_run_card_fits(
    server: str,  # noqa: F811
    visitor: dict[str, object],
    artifacts: Path,
) -> None:
    runner = visitor["runner"]
    _wait_new_final_card(runner, CELL, visitor["before"])  # type: ignore[arg-type]
    assert "Correct" in runner.locator(f"{CELL} .verdict").inner_text()  # type: ignore[attr-defined]
    page = visitor["reader"]
    wide: list[str] = []
    for width in WIDTHS:
        for scheme in SCHEMES:
            _fit(page, width, scheme)
            _visit(page, server + RUN_CHAPTER, scheme)
            card = page.locator(f"{CELL} [data-run-card]")  # type: ignore[attr-defined]
            assert card.get_attribute("data-final") == "true"
            page.wait_for_selector(f"{CELL} .roofline-chart svg")  # type: ignore[attr-defined]
            # Everything the card folds away, opened: logs, tables, the history.
            page.evaluate(  # type: ignore[attr-defined]
                "sel => document.querySelectorAll(sel + ' details').forEach(d => d.open = true)",
                CELL,
            )
            found = page.evaluate(OVERFLOW)  # type: ignore[attr-defined]
            problem = _too_wide(f"{RUN_CHAPTER} with a card, {width} px {scheme}", found)
            if problem:
                wide.append(problem)
            card.screenshot(path=str(artifacts / f"run-card-{width}-{scheme}.png"))
    assert not wide, "the run card widens the page:\n" + "\n".join(wide)
    assert visitor["errors"] == []
