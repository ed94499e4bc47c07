"""Guards every request passes: the body-size limit (before any parsing), the security
headers, pages with nothing inline for the CSP to block, and only public static files."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from kplay.app.guards import SECURITY_HEADERS, content_security_policy, is_served
from kplay.app.main import create_app
from kplay.config import Settings
from kplay.resources import data_dir
from tests.app.fakes import FakeExecutor

ROOT = Path(__file__).resolve().parents[2]
GOOD = {
    "problem": "vector_add",
    "backend": "numba-cpu",
    "source": "import numba\n\n@numba.njit\ndef vector_add(a, b, out, n):\n    pass\n",
}
PAGE = {"HX-Request": "true"}
LIMIT = 4096


@pytest.fixture
def small(make_settings: Callable[..., Settings]) -> Iterator[tuple[TestClient, FakeExecutor]]:
    """An app whose request bodies may be at most LIMIT bytes."""
    executor = FakeExecutor()
    app = create_app(make_settings(max_source_bytes=1000, max_body_bytes=LIMIT), executor)
    with TestClient(app) as client:
        yield client, executor


def _chunks(total: int, size: int = 1024) -> Iterator[bytes]:
    sent = 0
    while sent < total:
        yield b"x" * min(size, total - sent)
        sent += size


def test_the_default_limit_leaves_room_for_the_largest_source() -> None:
    settings = Settings(database_url="sqlite://", max_source_bytes=1000)
    assert settings.body_limit() == 3 * 1000 + 16384
    assert Settings(database_url="sqlite://", max_body_bytes=77).body_limit() == 77


def test_a_large_declared_body_is_refused_unread(
    small: tuple[TestClient, FakeExecutor],
) -> None:
    client, executor = small
    reply = client.post(
        "/api/v1/runs",
        content=b"{" + b" " * (LIMIT * 50),
        headers={"content-type": "application/json"},
    )
    assert reply.status_code == 413
    assert reply.json()["detail"] == (
        f"the request body is larger than the limit of {LIMIT} bytes; send a smaller kernel"
    )
    assert executor.jobs == []


def test_a_large_chunked_body_is_refused_as_it_streams(
    small: tuple[TestClient, FakeExecutor],
) -> None:
    client, executor = small
    reply = client.post(
        "/api/v1/runs",
        content=_chunks(LIMIT * 10),  # no Content-Length: Transfer-Encoding chunked
        headers={"content-type": "application/json"},
    )
    assert reply.status_code == 413 and f"limit of {LIMIT} bytes" in reply.json()["detail"]
    assert executor.jobs == []


def test_a_large_form_gets_the_cells_error_card(small: tuple[TestClient, FakeExecutor]) -> None:
    client, executor = small
    client.get("/")
    data = {"backend": "numba-cpu", "source": "x" * (LIMIT * 2)}
    declared = client.post("/cells/ch01-vadd-cpu/runs", data=data, headers=PAGE)
    streamed = client.post(
        "/cells/ch01-vadd-cpu/runs",
        content=_chunks(LIMIT * 3),
        headers={**PAGE, "content-type": "application/x-www-form-urlencoded"},
    )
    for reply in (declared, streamed):
        assert reply.status_code == 413 and "data-input-error" in reply.text
        assert f"limit of {LIMIT} bytes" in reply.text and "<html" not in reply.text
    assert executor.jobs == []


def test_a_body_under_the_limit_is_served(small: tuple[TestClient, FakeExecutor]) -> None:
    client, _ = small
    assert client.post("/api/v1/runs", json=GOOD).status_code == 201
    # Over the source limit but under the body limit: the service's own 413 names the source.
    reply = client.post("/api/v1/runs", json={**GOOD, "source": "x" * 2000})
    assert reply.status_code == 413 and "the limit is 1000 bytes" in reply.json()["detail"]


def test_a_content_length_that_is_not_a_number_is_refused(
    small: tuple[TestClient, FakeExecutor],
) -> None:
    client, _ = small
    reply = client.post(
        "/api/v1/runs",
        content=b"{}",
        headers={"content-length": "lots", "content-type": "application/json"},
    )
    assert reply.status_code == 400 and "not a number" in reply.json()["detail"]


@pytest.mark.parametrize(
    "url",
    [
        "/",
        "/book/p1/first-kernel-cpu",
        "/docs",
        "/api/v1/problems",
        "/static/css/book.css",
        "/nope",
        "/api/v1/runs/nope",
        "/healthz",
    ],
)
def test_every_answer_carries_the_security_headers(client: TestClient, url: str) -> None:
    reply, again = client.get(url), client.get(url)
    for name, value in SECURITY_HEADERS.items():
        assert reply.headers.get(name) == value, (url, name)
    csp = reply.headers["content-security-policy"]
    nonce = re.search(r"style-src 'self' 'nonce-([A-Za-z0-9_-]{24})'", csp)
    assert nonce is not None and csp == content_security_policy(nonce.group(1))
    assert "script-src 'self';" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert again.headers["content-security-policy"] != csp  # a fresh nonce every time
    if "text/html" in reply.headers["content-type"] and reply.status_code == 200:
        # The page hands its own nonce, and no other, to the editor.
        assert f'<meta name="csp-nonce" content="{nonce.group(1)}">' in reply.text


def _pages(app: FastAPI, client: TestClient) -> list[str]:
    chapters = [c.url for c in app.state.services.book.chapters()]
    return ["/", "/docs", "/fleet", "/book/p1/nope", *chapters]


def test_no_page_has_anything_inline_for_the_policy_to_block(
    app: FastAPI, client: TestClient
) -> None:
    client.post("/api/v1/runs", json={**GOOD, "cell": "ch01-vadd-cpu"})  # a run card too
    for url in _pages(app, client):
        html = client.get(url).text
        for tag in re.findall(r"<script\b[^>]*>", html):
            assert "src=" in tag or 'type="application/json"' in tag, (url, tag)
        assert "<style" not in html, url
        assert not re.search(r"<[^>]+\sstyle\s*=", html), url
        assert not re.search(r"<[^>]+\son[a-z]+\s*=", html), url
        assert "javascript:" not in html, url


@pytest.mark.parametrize(
    "path",
    [
        "dev/components.html",
        "dev/demo.js",
        "editor/package.json",
        "editor/src/index.js",
        "__init__.py",
        "dev/../dev/demo.js",
    ],
)
def test_development_files_are_not_served(client: TestClient, path: str) -> None:
    assert (data_dir("static") / path).resolve().is_file()
    assert client.get(f"/static/{path}").status_code == 404


def _package_data() -> set[str]:
    """Every file under static/ the wheel ships, by pyproject's package data for kplay.static."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["kplay.static"]
    root = data_dir("static")
    return {
        p.relative_to(root).as_posix()
        for pattern in patterns
        for p in root.glob(pattern)
        if p.is_file()
    }


def test_what_the_wheel_ships_is_served_and_the_gallery_is_neither(client: TestClient) -> None:
    shipped = _package_data()
    assert shipped and not any(p.startswith(("dev/", "editor/")) for p in shipped)
    assert all(is_served(p) for p in shipped)
    for path in ("js/playground.js", "js/theme.js", "vendor/htmx.min.js", "favicon.svg"):
        assert path in shipped and client.get(f"/static/{path}").status_code == 200
