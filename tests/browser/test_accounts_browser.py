"""Accounts in a real browser, against the real server and its real executor: an anonymous
reader runs a cell, signs up and still sees that run in the cell's history; logs out and
the history is gone; logs in again and it is back. The pages report no CSP violation."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.test_playground import (  # noqa: F401 - the module's fixtures
    ARTIFACTS,
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

CHAPTER = "/book/p1/first-kernel-cpu"
EMAIL = "reader@example.org"
PASSWORD = "a password long enough"


def _history_ids(page: object) -> list[str]:
    """The run ids the cell's history lists (empty when it lists none)."""
    return list(
        page.eval_on_selector_all(  # type: ignore[attr-defined]
            f"{CELL} [data-history] [data-load-run]",
            "els => els.map(e => e.dataset.loadRun)",
        )
    )


def _open_chapter(page: object, server: str) -> None:  # noqa: F811
    page.goto(server + CHAPTER)  # type: ignore[attr-defined]
    page.wait_for_selector(f"{CELL} .cm-editor")  # type: ignore[attr-defined]


def _shot(page: object, name: str) -> None:
    Path(ARTIFACTS).mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)  # type: ignore[attr-defined]


def test_an_anonymous_readers_run_follows_them_into_the_account(
    server: str,  # noqa: F811
    browser: object,  # noqa: F811
) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    said = _watch_csp(page)
    _open_chapter(page, server)

    # Anonymous: run the cell.
    _replace_code(page, GOOD)
    before = _card_id(page, CELL)
    page.click(f"{CELL} [data-run]")
    _wait_new_final_card(page, CELL, before)
    run_id = _card_id(page, CELL)
    assert run_id
    page.reload()
    page.wait_for_selector(f"{CELL} .cm-editor")
    assert run_id in _history_ids(page)

    # Sign up from the nav link: back on the chapter, the run is still in the history.
    page.click("[data-nav-signup]")
    page.wait_for_selector("[data-signup-form]")
    page.fill("#account-email", EMAIL)
    page.fill("#account-password", "short")
    page.click("[data-signup-form] button[type=submit]")
    assert "at least 10 characters" in page.inner_text("[data-account-error]")
    _shot(page, "accounts-signup-error.png")
    page.fill("#account-password", PASSWORD)
    page.fill("#account-display_name", "Reader One")
    page.click("[data-signup-form] button[type=submit]")
    page.wait_for_url(server + CHAPTER)
    page.wait_for_selector(f"{CELL} .cm-editor")
    assert page.inner_text("[data-nav-account]") == "Reader One"
    assert run_id in _history_ids(page)

    # Log out (on the account page): the history is hidden.
    page.click("[data-nav-account]")
    page.wait_for_selector("[data-logout-form]")
    assert EMAIL in page.inner_text("[data-account-who]")
    _shot(page, "accounts-page.png")
    page.click("[data-logout-form] button[type=submit]")
    page.wait_for_selector("[data-nav-login]")
    _open_chapter(page, server)
    assert _history_ids(page) == []

    # Log in again: the history is back.
    page.click("[data-nav-login]")
    page.wait_for_selector("[data-login-form]")
    page.fill("#account-email", EMAIL)
    page.fill("#account-password", "not the password")
    page.click("[data-login-form] button[type=submit]")
    assert "wrong" in page.inner_text("[data-account-error]")
    page.fill("#account-password", PASSWORD)
    page.click("[data-login-form] button[type=submit]")
    page.wait_for_url(server + CHAPTER)
    page.wait_for_selector(f"{CELL} .cm-editor")
    assert run_id in _history_ids(page)

    assert not errors, errors
    assert not said and not _csp_reports(page), (said, _csp_reports(page))
    context.close()
