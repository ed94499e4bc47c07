"""The book's pages: contents, chapters, cells wired for the editor, static files, no CDN."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from kplay.app.book import BookError
from kplay.app.main import create_app
from kplay.config import Settings
from kplay.kernels.catalog import load_catalog
from kplay.resources import data_dir
from tests.app.fakes import FakeExecutor


def test_contents_lists_chapters_by_part(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    html = page.text
    assert "Part I" in html and "Parallelism, from the CPU up" in html
    first = html.index("A first kernel on the CPU")
    second = html.index("Threads, blocks and a grid")
    assert first < second
    assert 'href="/book/p1/first-kernel-cpu"' in html and 'href="/book/p1/first-gpu-kernel"' in html


def test_theme_is_set_before_first_paint(client: TestClient) -> None:
    html = client.get("/").text
    head = html[: html.index("</head>")]
    # The theme script loads (not deferred) before any stylesheet, so no light flash for dark
    # readers; it is a file, as the Content-Security-Policy allows no inline script.
    theme = re.search(r'<script src="(/static/js/theme\.js[^"]*)"></script>', head)
    assert theme is not None and theme.start() < head.index('rel="stylesheet"')
    assert 'localStorage.getItem("kplay:theme")' in client.get(theme.group(1)).text
    assert "data-theme-toggle" in html


def test_nothing_is_loaded_from_elsewhere(client: TestClient) -> None:
    for url in ("/", "/book/p1/first-kernel-cpu", "/book/p1/first-gpu-kernel"):
        html = client.get(url).text
        for attr in re.findall(r'<(?:script|link|img)[^>]+(?:src|href)="([^"]+)"', html):
            assert attr.startswith("/static/"), f"{url} loads {attr}"


def test_chapter_page_has_cells_with_starters(client: TestClient) -> None:
    page = client.get("/book/p1/first-gpu-kernel")
    assert page.status_code == 200
    html = page.text
    assert 'data-cell="ch02-vadd-gpu"' in html
    blob = re.search(
        r'<script type="application/json" class="kcell-data">(.*?)</script>', html, re.S
    )
    assert blob is not None
    data = json.loads(blob.group(1))
    problem = load_catalog()["vector_add"]
    assert data["problem"] == "vector_add" and data["backend"] == "cuda"
    keys = [b["key"] for b in data["backends"]]
    assert keys == ["cuda", "numba-cuda", "triton"]
    for offer in data["backends"]:
        assert offer["starter"] == problem.starter(offer["key"])
    languages = {b["key"]: b["language"] for b in data["backends"]}
    assert languages == {"cuda": "cpp", "numba-cuda": "python", "triton": "python"}
    assert 'role="tablist"' in html and 'aria-selected="true"' in html
    assert "/static/vendor/editor.js" in html and "/static/js/roofline.js" in html


def test_chapter_has_previous_and_next(client: TestClient) -> None:
    first = client.get("/book/p1/first-kernel-cpu").text
    assert 'rel="next" href="/book/p1/roofline"' in first and 'rel="prev"' not in first
    second = client.get("/book/p1/roofline").text
    assert 'rel="prev" href="/book/p1/first-kernel-cpu"' in second


def test_every_cell_on_every_page_names_a_known_problem(client: TestClient) -> None:
    catalog = load_catalog()
    for chapter in client.app.state.services.book.chapters():  # type: ignore[attr-defined]
        html = client.get(chapter.url).text
        for blob in re.findall(r'class="kcell-data">(.*?)</script>', html, re.S):
            data = json.loads(blob)
            for offer in data["backends"]:
                assert offer["key"] in catalog[data["problem"]].backends


def test_unknown_chapter_is_a_404_page(client: TestClient) -> None:
    for url in ("/book/no-such-chapter", "/book/p1/no-such-chapter"):
        page = client.get(url)
        assert page.status_code == 404
        assert "no-such-chapter" in page.text and "<html" in page.text


# The chapter addresses before parts became folders, and where each lives now.
ADDRESSES_BEFORE_THE_MOVE = {
    "/book/first-kernel-cpu": "/book/p1/first-kernel-cpu",
    "/book/first-gpu-kernel": "/book/p1/first-gpu-kernel",
    "/book/roofline": "/book/p1/roofline",
    "/book/ilp-simd": "/book/p1/ilp-simd",
    "/book/cpu-threads": "/book/p1/cpu-threads",
    "/book/transpose": "/book/p1/transpose",
    "/book/reductions": "/book/p1/reductions",
    "/book/gemm-naive": "/book/p2/gemm-naive",
    "/book/gemm-coalescing": "/book/p2/gemm-coalescing",
    "/book/gemm-smem-tiling": "/book/p2/gemm-smem-tiling",
    "/book/gemm-blocktiling": "/book/p2/gemm-blocktiling",
    "/book/gemm-vectorized": "/book/p2/gemm-vectorized",
    "/book/gemm-warptiling": "/book/p2/gemm-warptiling",
    "/book/gemm-wmma": "/book/p2/gemm-wmma",
    "/book/gemm-ladder": "/book/p2/gemm-ladder",
}


def test_old_chapter_addresses_redirect_for_good(client: TestClient) -> None:
    book = client.app.state.services.book  # type: ignore[attr-defined]
    # Every chapter that existed before parts were folders (Parts I and II) has its old address.
    before = [c.url for c in book.chapters() if c.url.startswith(("/book/p1/", "/book/p2/"))]
    assert sorted(ADDRESSES_BEFORE_THE_MOVE.values()) == sorted(before)
    for old, new in ADDRESSES_BEFORE_THE_MOVE.items():
        moved = client.get(old, follow_redirects=False)
        assert moved.status_code == 301, old
        assert moved.headers["location"] == new
        assert client.get(new, follow_redirects=False).status_code == 200, new
    kept = client.get("/book/roofline?x=1", follow_redirects=False)
    assert kept.headers["location"] == "/book/p1/roofline?x=1"
    # A chapter asked for under another part is sent to its own.
    other = client.get("/book/p2/roofline", follow_redirects=False)
    assert other.status_code == 301 and other.headers["location"] == "/book/p1/roofline"


def test_static_files_are_served(client: TestClient) -> None:
    for path in ("/static/css/book.css", "/static/js/playground.js"):
        assert client.get(path).status_code == 200
    assert client.get("/static/nothing-here.js").status_code == 404


def test_latest_run_of_a_cell_is_shown_on_reload(client: TestClient) -> None:
    client.post(
        "/cells/ch01-vadd-cpu/runs",
        data={"backend": "numba-cpu", "source": "def f(): pass\n"},
        headers={"HX-Request": "true"},
    )
    html = client.get("/book/p1/first-kernel-cpu").text
    cell = html[html.index('id="cell-ch01-vadd-cpu"') : html.index('id="cell-ch01-saxpy-cpu"')]
    assert "Correct" in cell and "Your attempts" in cell


def test_responses_say_their_server_time(client: TestClient) -> None:
    timing = client.get("/book/p1/first-kernel-cpu").headers["server-timing"]
    assert timing.startswith("app;dur=")


def _book(tmp_path: Path) -> Path:
    book = tmp_path / "book"
    ignore = shutil.ignore_patterns("__pycache__", "__init__.py")
    shutil.copytree(data_dir("book"), book, ignore=ignore)
    return book


def test_a_broken_book_stops_the_start(tmp_path: Path, executor: FakeExecutor) -> None:
    book = _book(tmp_path)
    path = book / "p1" / "01-first-kernel-cpu.md"
    path.write_text(path.read_text().replace("problem: saxpy", "problem: saxpyy"))
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'k.sqlite3'}", book_dir=book)
    where = r"p1/01-first-kernel-cpu.md:\d+: .*unknown problem 'saxpyy'"
    with pytest.raises(BookError, match=where):
        create_app(settings, executor)


def test_a_chapter_broken_while_served_shows_where(tmp_path: Path, executor: FakeExecutor) -> None:
    book = _book(tmp_path)
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'k.sqlite3'}", book_dir=book)
    with TestClient(create_app(settings, executor)) as client:
        path = book / "p1" / "05-first-gpu-kernel.md"
        path.write_text(path.read_text().replace("backend: cuda\n", "backend: opencl\n"))
        later = time.time() + 5
        os.utime(path, (later, later))
        page = client.get("/book/p1/first-gpu-kernel")
    assert page.status_code == 500
    assert "p1/05-first-gpu-kernel.md:" in page.text and "opencl" in page.text


def test_a_part_without_a_title_stops_the_start(tmp_path: Path, executor: FakeExecutor) -> None:
    book = _book(tmp_path)
    (book / "p2" / "part.toml").unlink()
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'k.sqlite3'}", book_dir=book)
    with pytest.raises(BookError, match=r"p2/part.toml: missing part.toml"):
        create_app(settings, executor)
