"""The editor and roofline islands in a real Chromium, driven through their public APIs.

The static/ folder is served by a small http.server on a free port; the page under test is
static/dev/components.html, which loads the committed bundles with a stand-in theme.
Screenshots of both themes land in test-artifacts/ for a person to look at.
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "static"
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]

ROOFLINE: dict[str, Any] = {
    "device": "Test GPU",
    "source": "calibrated",
    "memory_name": "HBM",
    "memory_bytes_per_s": 4.3e12,
    "compute_flops_per_s": 51e12,
    "compute_name": "FP32",
    "points": [
        {
            "label": "naive",
            "intensity_flops_per_byte": 0.25,
            "flops_per_s": 2.1e11,
            "current": False,
            "details": {"median": "96.0 µs"},
        },
        {
            "label": "tiled",
            "intensity_flops_per_byte": 4.0,
            "flops_per_s": 6.2e12,
            "current": False,
            "details": {"median": "3.25 µs"},
        },
        {
            "label": "registers",
            "intensity_flops_per_byte": 16.0,
            "flops_per_s": 3.1e13,
            "current": True,
            "details": {"median": "0.65 µs", "GFLOP/s": "31000"},
        },
    ],
}

# Creates a fresh editor in its own host element; counters live on window.t.
CREATE_EDITOR = """([doc, language]) => {
  const host = document.createElement("div");
  host.id = "t-editor";
  document.querySelector("main").append(host);
  const t = { runs: 0, changes: 0, last: null };
  t.editor = window.KPlayEditor.create(host, {
    doc, language, dark: false,
    onRun: () => { t.runs += 1; },
    onChange: (d) => { t.changes += 1; t.last = d; },
  });
  window.t = t;
}"""

RENDER_ROOFLINE = """(data) => {
  let host = document.getElementById("t-roofline");
  if (!host) {
    host = document.createElement("div");
    host.id = "t-roofline";
    document.querySelector("main").append(host);
  }
  window.KPlayRoofline.render(host, data);
}"""


def _unavailable(reason: str) -> None:
    if os.environ.get("KPLAY_REQUIRE_SERVICES") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(STATIC))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        _unavailable(f"{CHROMIUM} is missing")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed")
    playwright = sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
    except Exception as exc:  # a broken browser install is an environment problem
        playwright.stop()
        _unavailable(f"Chromium did not start: {exc}")
    try:
        yield chromium
    finally:
        chromium.close()
        playwright.stop()


@pytest.fixture()
def page(browser: Any, base_url: str) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 900, "height": 1200})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    tab.page_errors = errors
    tab.goto(f"{base_url}/dev/components.html")
    tab.wait_for_function("window.KPlayEditor && window.KPlayRoofline && window.kplayDemo")
    yield tab
    context.close()


def _set_theme(page: Any, dark: bool) -> None:
    page.evaluate(
        """(dark) => {
          document.documentElement.dataset.theme = dark ? "dark" : "light";
          window.kplayDemo.editor.setDark(dark);
          if (window.t) window.t.editor.setDark(dark);
        }""",
        dark,
    )


def _css_var(page: Any, name: str) -> str:
    return page.evaluate(
        "(n) => getComputedStyle(document.documentElement).getPropertyValue(n).trim()", name
    )


def _resolved_colour(page: Any, value: str) -> str:
    """A CSS colour as the browser computes it, for comparing with computed styles."""
    return page.evaluate(
        """(v) => { const p = document.createElement("p"); p.style.color = v;
          document.body.append(p); const c = getComputedStyle(p).color; p.remove(); return c; }""",
        value,
    )


def test_bundles_are_committed() -> None:
    for rel in (
        "vendor/editor.js",
        "vendor/htmx.min.js",
        "js/roofline.js",
        "css/components.css",
        "fonts/fonts.css",
    ):
        assert (STATIC / rel).stat().st_size > 0, rel
    assert "KPlayEditor" in (STATIC / "vendor/editor.js").read_text(encoding="utf-8")


def test_ctrl_enter_runs_without_inserting_a_newline(page: Any) -> None:
    page.evaluate(CREATE_EDITOR, ["x = 1", "python"])
    content = page.locator("#t-editor .cm-content")
    content.click()
    page.keyboard.press("Control+End")
    page.keyboard.type(" + 2")
    page.keyboard.press("Control+Enter")
    state = page.evaluate(
        "() => ({runs: t.runs, changes: t.changes, last: t.last, doc: t.editor.getDoc()})"
    )
    assert state["runs"] == 1
    assert state["doc"] == "x = 1 + 2"
    assert state["last"] == "x = 1 + 2"
    assert state["changes"] >= 1
    assert page.page_errors == []


def test_set_doc_replaces_text_and_does_not_report_a_change(page: Any) -> None:
    page.evaluate(CREATE_EDITOR, ["int a;", "cpp"])
    page.evaluate("() => t.editor.setDoc('int b;\\nint c;')")
    state = page.evaluate("() => ({changes: t.changes, doc: t.editor.getDoc()})")
    assert state == {"changes": 0, "doc": "int b;\nint c;"}
    assert page.locator("#t-editor .cm-line").count() == 2


def test_mark_lines_puts_marker_highlight_and_tooltip_on_the_line(page: Any) -> None:
    page.evaluate(CREATE_EDITOR, ["line one\nline two\nline three", "cpp"])
    page.evaluate(
        """() => t.editor.markLines([
          {line: 2, severity: "error", message: "expected ';' after expression"},
          {line: 99, severity: "warning", message: "past the end"},
          {line: 0, severity: "note", message: "before the start"},
        ])"""
    )
    lines = page.locator("#t-editor .cm-line")
    assert "cm-kplay-line-error" in (lines.nth(1).get_attribute("class") or "")
    assert "cm-kplay-line-warning" in (lines.nth(2).get_attribute("class") or "")
    assert "cm-kplay-line-note" in (lines.nth(0).get_attribute("class") or "")

    marker = page.locator("#t-editor .cm-lint-marker-error")
    assert marker.count() == 1
    line_box = lines.nth(1).bounding_box()
    marker_box = marker.bounding_box()
    assert line_box and marker_box
    assert (
        line_box["y"]
        <= marker_box["y"] + marker_box["height"] / 2
        <= (line_box["y"] + line_box["height"])
    )

    marker.hover()
    tooltip = page.locator(".cm-tooltip-lint")
    tooltip.wait_for(state="visible")
    assert "expected ';' after expression" in tooltip.inner_text()

    page.evaluate("() => t.editor.clearMarks()")
    assert page.locator("#t-editor .cm-lint-marker").count() == 0
    assert page.locator("#t-editor .cm-kplay-line").count() == 0


def test_tab_indents_and_escape_then_tab_leaves(page: Any) -> None:
    page.evaluate(CREATE_EDITOR, ["x", "python"])
    page.locator("#t-editor .cm-content").click()
    page.keyboard.press("Home")
    page.keyboard.press("Tab")
    assert page.evaluate("() => t.editor.getDoc()").startswith("    x")
    page.keyboard.press("Escape")
    page.keyboard.press("Tab")
    still_inside = page.evaluate(
        "() => document.getElementById('t-editor').contains(document.activeElement)"
    )
    assert still_inside is False
    assert page.evaluate("() => t.editor.getDoc()") == "    x"


def test_editor_has_an_accessible_label_that_follows_the_language(page: Any) -> None:
    page.evaluate(CREATE_EDITOR, ["", "cpp"])
    content = page.locator("#t-editor .cm-content")
    assert "C++" in (content.get_attribute("aria-label") or "")
    page.evaluate("() => t.editor.setLanguage('python')")
    assert "Python" in (content.get_attribute("aria-label") or "")
    page.evaluate("() => t.editor.destroy()")
    assert page.locator("#t-editor .cm-editor").count() == 0


def test_roofline_draws_roofs_points_and_hover_tooltip(page: Any) -> None:
    page.evaluate(RENDER_ROOFLINE, ROOFLINE)
    chart = page.locator("#t-roofline")
    assert chart.locator(".kp-rl-point").count() == 3
    assert chart.locator(".kp-rl-point.is-current").count() == 1
    assert chart.locator("svg title").text_content() == "Roofline of Test GPU"
    assert "ridge point" in (chart.locator("svg desc").text_content() or "")
    labels = chart.locator(".kp-rl-roof-label").all_text_contents()
    assert "HBM 4.3 TB/s" in labels
    assert "FP32 51 TFLOP/s" in labels
    ticks = chart.locator(".kp-rl-tick").all_text_contents()
    assert "1 T" in ticks and "10 T" in ticks
    assert chart.locator(".kp-rl-note").inner_text() == "ceilings: calibrated on Test GPU"

    chart.locator(".kp-rl-point:not(.is-current) .kp-rl-hit").first.hover()
    tooltip = chart.locator(".kp-rl-tooltip")
    tooltip.wait_for(state="visible")
    assert "naive" in tooltip.inner_text()
    assert "96.0 µs" in tooltip.inner_text()
    assert "of roof" in tooltip.inner_text()
    assert page.page_errors == []


def test_roofline_point_is_reachable_by_keyboard(page: Any) -> None:
    page.evaluate(RENDER_ROOFLINE, ROOFLINE)
    current = page.locator("#t-roofline .kp-rl-point.is-current")
    assert current.get_attribute("tabindex") == "0"
    assert "registers" in (current.get_attribute("aria-label") or "")
    current.focus()
    tooltip = page.locator("#t-roofline .kp-rl-tooltip")
    tooltip.wait_for(state="visible")
    assert "registers" in tooltip.inner_text()
    page.keyboard.press("ArrowLeft")
    assert "tiled" in tooltip.inner_text()
    page.keyboard.press("Escape")
    assert tooltip.is_hidden()


def test_roofline_rerender_replaces_chart_and_axes_fit_extremes(page: Any) -> None:
    page.evaluate(RENDER_ROOFLINE, ROOFLINE)
    extreme = {
        **ROOFLINE,
        "source": "datasheet",
        "points": [
            {"label": "tiny", "intensity_flops_per_byte": 1e-3, "flops_per_s": 1e8},
            {
                "label": "huge",
                "intensity_flops_per_byte": 1e4,
                "flops_per_s": 4e13,
                "current": True,
            },
            {"label": "untimed", "intensity_flops_per_byte": 2.0, "flops_per_s": None},
        ],
    }
    page.evaluate(RENDER_ROOFLINE, extreme)
    chart = page.locator("#t-roofline")
    assert chart.locator(".kp-roofline").count() == 1
    assert chart.locator(".kp-rl-point").count() == 2
    note = chart.locator(".kp-rl-note").inner_text()
    assert note.startswith("datasheet values for Test GPU")
    assert "1 run without a timing" in note
    frame = chart.locator(".kp-rl-frame").bounding_box()
    assert frame
    for i in range(2):
        dot = chart.locator(".kp-rl-dot").nth(i).bounding_box()
        assert dot
        centre_x = dot["x"] + dot["width"] / 2
        centre_y = dot["y"] + dot["height"] / 2
        assert frame["x"] <= centre_x <= frame["x"] + frame["width"]
        assert frame["y"] <= centre_y <= frame["y"] + frame["height"]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_both_themes_use_the_page_variables(page: Any, theme: str) -> None:
    dark = theme == "dark"
    _set_theme(page, dark)
    page.click("#mark")
    page.locator("#roofline .kp-rl-point.is-current .kp-rl-hit").hover()
    page.locator("#roofline .kp-rl-tooltip").wait_for(state="visible")

    editor_bg = page.evaluate(
        "() => getComputedStyle(document.querySelector('#editor .cm-editor')).backgroundColor"
    )
    assert editor_bg == _resolved_colour(page, _css_var(page, "--bg-soft"))
    roof_stroke = page.evaluate(
        "() => getComputedStyle(document.querySelector('#roofline .kp-rl-roof')).stroke"
    )
    assert roof_stroke == _resolved_colour(page, _css_var(page, "--fg"))
    error_marker = page.evaluate(
        "() => getComputedStyle(document.querySelector('#editor .cm-lint-marker-error'))"
        ".backgroundColor"
    )
    assert error_marker == _resolved_colour(page, _css_var(page, "--bad"))

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"components-{theme}.png"), full_page=True)
    assert (ARTIFACTS / f"components-{theme}.png").stat().st_size > 0
    assert page.page_errors == []
