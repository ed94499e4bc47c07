"""The playground in a real browser against the real server and the real LocalExecutor:
open a chapter, write a kernel, run it with Ctrl-Enter, read the card, switch theme, reload."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = REPO / "test-artifacts"
CELL = "#cell-ch01-vadd-cpu"
RUN_LIMIT_MS = 240_000

GOOD = """import numba


@numba.njit(fastmath=True)
def vector_add(a, b, out, n):
    for i in range(n):
        out[i] = a[i] + b[i]
"""
# Line 7 misses its right-hand side: a compile error on a known line.
BROKEN = GOOD.replace("out[i] = a[i] + b[i]", "out[i] = a[i] +")


def _require_browser() -> None:
    reason = None
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} is not installed"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            reason = "the playwright package is not installed"
    if reason:
        if os.environ.get("KPLAY_REQUIRE_SERVICES") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_up(url: str, proc: subprocess.Popen[bytes], log: Path, limit_s: float = 120) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the server exited with {proc.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"the server did not answer at {url} within {limit_s} s")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    _require_browser()
    data = tmp_path_factory.mktemp("server")
    with running_server(data) as (url, _database):
        key = data / "xdg-data" / "kernel-playground" / "secret_key"
        assert key.is_file() and key.stat().st_mode & 0o777 == 0o600
        yield url


@contextmanager
def running_server(data: Path) -> Iterator[tuple[str, str]]:
    """`kplay serve` (embedded, one pool slot) on a free port with its database and data
    folder in `data`: its URL and its database's URL, until the block ends."""
    port = _free_port()
    database_url = f"sqlite:///{data / 'kplay.sqlite3'}"
    env = {
        **os.environ,
        "KPLAY_DATABASE_URL": database_url,
        "KPLAY_PORT": str(port),
        "KPLAY_POOL_SIZE": "1",
        "KPLAY_JOB_TIMEOUT_S": "180",
        "KPLAY_LOG_LEVEL": "warning",
        # The session key the server makes at first start goes to this data folder.
        "XDG_DATA_HOME": str(data / "xdg-data"),
    }
    env.pop("KPLAY_BROKER_URL", None)
    env.pop("KPLAY_SECRET_KEY", None)
    log_path = data / "server.log"
    with log_path.open("wb") as log:
        # The server's run durations for the machine (the wait estimates' prior) go to this
        # data folder, not to the user's cache, where a later `kplay serve` would start its
        # estimates from the test's jobs; the rest of the cache (builds, ceilings) is shared.
        start = (
            "from pathlib import Path; from kplay.app import executors; "
            f"executors.machine_durations_file = lambda s: Path({str(data)!r}) / "
            "f'machine-waits-{s.pool_size}.json'; from app.main import serve; serve()"
        )
        proc = subprocess.Popen(
            [sys.executable, "-c", start],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_up(url, proc, log_path)
            yield url, database_url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield chromium
        chromium.close()


def _shot(page: object, name: str, **kwargs: object) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), **kwargs)  # type: ignore[attr-defined]


def _shot_live_card(card: object) -> None:
    """A picture of the card while it runs, unless the next poll has already swapped it out
    (a busy machine, a quick run): the card's content is checked elsewhere."""
    from playwright.sync_api import Error as PlaywrightError

    try:
        card.screenshot(path=str(ARTIFACTS / "playground-card-live.png"))  # type: ignore[attr-defined]
    except PlaywrightError as exc:
        # Swapped out: detached, or still attached but hidden while the next one renders.
        if not any(m in str(exc) for m in ("not attached to the DOM", "not visible")):
            raise


def _replace_code(page: object, code: str) -> None:
    """Select everything in the cell's editor and type the new kernel in."""
    content = page.locator(f"{CELL} .cm-content")  # type: ignore[attr-defined]
    content.click()
    mod = "Meta" if sys.platform == "darwin" else "Control"
    page.keyboard.press(f"{mod}+a")  # type: ignore[attr-defined]
    page.keyboard.press("Delete")  # type: ignore[attr-defined]
    # insert_text types as one input event, so the editor's auto-indent cannot re-indent it.
    page.keyboard.insert_text(code)  # type: ignore[attr-defined]


def _card_id(page: object, cell: str) -> str | None:
    card = page.query_selector(f"{cell} [data-run-card]")  # type: ignore[attr-defined]
    return card.get_attribute("data-run-id") if card else None


def _wait_new_final_card(page: object, cell: str, old_id: str | None) -> None:
    """Wait for the final card of a run other than `old_id` (the card shown before Run)."""
    page.wait_for_function(  # type: ignore[attr-defined]
        """([sel, old]) => {
            const card = document.querySelector(sel + ' [data-run-card]');
            return card && card.dataset.final === 'true' && card.dataset.runId !== old;
        }""",
        arg=[cell, old_id or ""],
        timeout=RUN_LIMIT_MS,
    )


# Every Content-Security-Policy violation the page reports, kept on the window.
CSP_WATCH = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__cspViolations.push(e.violatedDirective + " blocked " + (e.blockedURI || "inline"));
});
"""


def _watch_csp(page: object) -> list[str]:
    """Console messages about the policy; the page's own reports are read with _csp_reports."""
    said: list[str] = []
    page.add_init_script(CSP_WATCH)  # type: ignore[attr-defined]
    page.on(  # type: ignore[attr-defined]
        "console",
        lambda msg: said.append(msg.text) if "Content Security Policy" in msg.text else None,
    )
    return said


def _csp_reports(page: object) -> list[str]:
    return list(page.evaluate("window.__cspViolations || []"))  # type: ignore[attr-defined]


def test_write_run_and_read_the_card(server: str, browser: object) -> None:
    context = browser.new_context(viewport={"width": 1366, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    csp_console = _watch_csp(page)
    page.goto(f"{server}/book/p1/first-kernel-cpu")
    page.wait_for_selector(f"{CELL} .cm-editor")
    assert "TODO" in page.locator(f"{CELL} .cm-content").inner_text()
    _shot(page, "playground-chapter-light.png", full_page=False)

    _replace_code(page, GOOD)
    before = _card_id(page, CELL)
    page.keyboard.press("Control+Enter")
    live = page.wait_for_selector(f'{CELL} [data-run-card][data-final="false"]', timeout=10_000)
    assert live is not None
    _shot_live_card(live)
    _wait_new_final_card(page, CELL, before)
    verdict = page.locator(f"{CELL} .verdict").inner_text()
    assert "Correct" in verdict, page.locator(f"{CELL} [data-run-card]").inner_text()
    # The verdict is announced by the script that activates the swapped-in card.
    page.wait_for_function(
        "sel => (document.querySelector(sel)?.textContent || '').length > 0",
        arg=f"{CELL} [data-announce]",
        timeout=5_000,
    )
    spoken = page.locator(f"{CELL} [data-announce]").text_content() or ""
    assert spoken.startswith("Run finished: Correct. median")
    page.wait_for_selector(f"{CELL} .roofline-chart svg")
    points = page.locator(f"{CELL} .roofline-chart svg .kp-rl-point")
    assert points.count() >= 1
    assert page.locator(f"{CELL} .roofline-chart svg .kp-rl-point.is-current").count() == 1
    page.wait_for_selector(f"{CELL} [data-history-box]")
    # The chapter with a finished run's card, its chart and the editor: nothing was blocked.
    policy = page.evaluate(
        "fetch(location.href).then(r => r.headers.get('content-security-policy'))"
    )
    assert policy and "script-src 'self'" in policy
    assert _csp_reports(page) == [] and csp_console == []
    page.locator(f"{CELL} .kcell-result").scroll_into_view_if_needed()
    _shot(page, "playground-card-light.png", full_page=False)
    page.locator(CELL).screenshot(path=str(ARTIFACTS / "playground-cell-light.png"))

    page.click("[data-theme-toggle]")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    page.locator(CELL).screenshot(path=str(ARTIFACTS / "playground-cell-dark.png"))

    page.reload()
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    page.wait_for_selector(f"{CELL} .cm-editor")
    assert "out[i] = a[i] + b[i]" in page.locator(f"{CELL} .cm-content").inner_text()
    assert "Correct" in page.locator(f"{CELL} .verdict").inner_text()
    page.wait_for_selector(f"{CELL} .roofline-chart svg .kp-rl-point")
    _shot(page, "playground-reloaded-dark.png", full_page=False)

    # Reset asks first, then brings the starter back, and the reset survives a reload.
    page.once("dialog", lambda dialog: dialog.accept())
    page.click(f"{CELL} [data-reset]")
    assert "TODO" in page.locator(f"{CELL} .cm-content").inner_text()
    page.reload()
    page.wait_for_selector(f"{CELL} .cm-editor")
    assert "TODO" in page.locator(f"{CELL} .cm-content").inner_text()

    # An earlier attempt comes back into the editor from the list under the cell.
    page.click(f"{CELL} [data-history-box] > summary")
    page.locator(f"{CELL} [data-load-run]").first.click()
    page.wait_for_function(
        "sel => document.querySelector(sel).innerText.includes('out[i] = a[i] + b[i]')",
        arg=f"{CELL} .cm-content",
    )
    assert errors == []
    assert _csp_reports(page) == [] and csp_console == []
    context.close()


def test_compile_error_marks_the_line(server: str, browser: object) -> None:
    context = browser.new_context(viewport={"width": 1366, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    page.goto(f"{server}/book/p1/first-kernel-cpu")
    page.wait_for_selector(f"{CELL} .cm-editor")
    _replace_code(page, BROKEN)
    before = _card_id(page, CELL)
    page.click(f"{CELL} [data-run]")
    _wait_new_final_card(page, CELL, before)
    assert "Compile error" in page.locator(f"{CELL} .verdict").inner_text()
    assert page.locator(f'{CELL} [data-goto-line="7"]').count() >= 1
    page.wait_for_selector(f"{CELL} .cm-kplay-line-error", timeout=5_000)
    page.locator(CELL).screenshot(path=str(ARTIFACTS / "playground-compile-error.png"))
    context.close()


def test_tablet_layout_and_bad_input_card(server: str, browser: object) -> None:
    context = browser.new_context(viewport={"width": 820, "height": 1180})  # type: ignore[attr-defined]
    page = context.new_page()
    page.goto(f"{server}/book/p1/first-gpu-kernel")
    cell = "#cell-ch02-vadd-gpu"
    page.wait_for_selector(f"{cell} .cm-editor")
    page.click(f'{cell} .kcell-tab[data-backend="triton"]')
    assert "tl.program_id" in page.locator(f"{cell} .cm-content").inner_text()
    page.click(f"{cell} .kcell-launch summary")
    page.fill(f'{cell} input[name="num_warps"]', "3")
    page.click(f"{cell} [data-run]")
    page.wait_for_selector(f"{cell} [data-input-error]")
    assert "power of two" in page.locator(f"{cell} .run-message").inner_text()
    assert "tl.program_id" in page.locator(f"{cell} .cm-content").inner_text()
    page.locator(cell).scroll_into_view_if_needed()
    _shot(page, "playground-tablet.png", full_page=False)
    page.goto(server + "/")
    _shot(page, "playground-contents-tablet.png", full_page=True)
    context.close()
