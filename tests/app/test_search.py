"""Full-text search over the book and the problem catalog: the same queries, the same first
sections, on the embedded app's SQLite FTS5 and on PostgreSQL's full-text search."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from kplay.app.main import create_app
from kplay.config import Settings
from tests.app.fakes import FakeExecutor

# Each query and the section that must come first, read off the book's Markdown.
FIRST_SECTION = {
    "bank conflict": "/book/p1/transpose#bank-conflicts",
    "roofline": "/book/p1/roofline",
    "shared memory tiling": "/book/p2/gemm-smem-tiling",
    "grid-stride loops": "/book/p1/first-gpu-kernel#grid-stride-loops",
    "faster warp shuffles": "/book/p1/reductions#level-2-faster-warp-shuffles",
    "how a warp reads memory": "/book/p2/gemm-coalescing#how-a-warp-reads-memory",
    "prange": "/book/p1/cpu-threads#prange",
    "grid-stride loop": "/book/p1/first-gpu-kernel#grid-stride-loops",
    "feeding the tensor cores": "/book/p2/gemm-wmma#feeding-the-tensor-cores",
    "WMMA API": "/book/p2/gemm-wmma#the-wmma-api",
    "simd": "/book/p1/ilp-simd#simd-one-instruction-sixteen-floats",
    "fastmath": "/book/p1/ilp-simd#what-fastmath-costs",
    "triad": "/book/p1/roofline#measuring-the-memory-roof-the-triad",
    "atomics": "/book/p1/reductions#level-3-the-grid-with-atomics",
    "registers": "/book/p2/gemm-blocktiling#registers-and-keeping-them-registers",
    "alignment": "/book/p2/gemm-vectorized#alignment-and-shapes-that-do-not-cooperate",
    "naive transpose": "/book/p1/transpose#the-naive-transpose",
    "wmma stops short": "/book/p2/gemm-wmma#why-wmma-stops-short-on-hopper",
    "hopper tour": "/book/p4/hopper-tour",
    "cuBLAS": "/book/p2/gemm-ladder",
    "rounding guard": "/book/p1/first-gpu-kernel#rounding-up-and-the-guard",
}
# FTS5 and tsquery syntax, SQL and markup: each is read as plain words or as none.
AWKWARD = [
    '"bank',
    'bank"conflict"',
    "*",
    "roof*",
    "-bank",
    "NOT bank",
    "bank NEAR conflict",
    "NEAR(bank conflict, 2)",
    "(shared",
    "shared)",
    "heading:bank",
    "{heading}: bank",
    "bank' OR 1=1 --",
    "&|!:*<->",
    "a & b | !c",
    "bank\x00conflict",
    "<script>alert(1)</script>",
    "AND",
    "OR OR",
    "^bank",
    "bank + conflict",
    "\\",
    "'",
    "ünïcödé ☃",
]


@pytest.fixture
def search_client(
    database_url: str, make_settings: Callable[..., Settings]
) -> Iterator[TestClient]:
    with TestClient(create_app(make_settings(database_url=database_url), FakeExecutor())) as c:
        yield c


def _search(client: TestClient, q: str) -> dict:
    answer = client.get("/api/v1/search", params={"q": q})
    assert answer.status_code == 200, (q, answer.text)
    return answer.json()


def test_each_query_finds_its_section_first(search_client: TestClient) -> None:
    wrong = []
    for query, url in FIRST_SECTION.items():
        sections = _search(search_client, query)["sections"]
        first = sections[0]["url"] if sections else None
        if first != url:
            wrong.append(f"{query!r}: {first} (expected {url})")
    assert not wrong, "\n".join(wrong)


def test_a_heading_match_outranks_a_text_match(search_client: TestClient) -> None:
    found = _search(search_client, "occupancy")
    marked = ["<mark>" in hit["title_html"] for hit in found["sections"]]
    assert marked[0] and not all(marked)  # sections that only mention it in the text follow
    assert marked == sorted(marked, reverse=True)
    # Two chapters have a section of that name (Part I's and the profiling chapter's).
    headed = [hit for hit in found["sections"] if "<mark>" in hit["title_html"]]
    assert "5. Threads, blocks and a grid" in {hit["chapter"] for hit in headed}
    assert all(hit["title"] == "Occupancy" for hit in headed)
    assert "<mark>" in headed[0]["snippet_html"]


def test_problems_link_to_the_cell_that_embeds_them(search_client: TestClient) -> None:
    found = _search(search_client, "matrix transpose")
    first = found["problems"][0]
    assert first["url"] == "/book/p1/transpose#cell-ch06-transpose"
    assert first["chapter"].endswith("Coalescing and shared memory, through the transpose")
    # No chapter has these words; the RGB-to-grey problem (in no chapter) has them in its title.
    found = _search(search_client, "rgb grey")
    assert not found["sections"]
    assert found["problems"][0]["title"] == "RGB to grey, in bytes"
    # In no chapter: the result opens the problem's own cell in the catalog.
    assert found["problems"][0]["url"] == "/problems/rgb_to_grey"


def test_fts_syntax_is_read_as_plain_words(search_client: TestClient) -> None:
    for query in AWKWARD:
        found = _search(search_client, query)
        for hit in found["sections"] + found["problems"]:
            assert "<" not in re.sub(r"</?mark>", "", hit["snippet_html"] + hit["title_html"])
        page = search_client.get("/search", params={"q": query})
        assert page.status_code == 200, (query, page.text[-500:])
        assert "<script>alert" not in page.text
    quoted = _search(search_client, '{heading}: "bank" NEAR(conflict*)')
    assert quoted["terms"] == ["heading", "bank", "near", "conflict"]
    assert (
        _search(search_client, '"bank conflict"')["sections"][0]["url"]
        == FIRST_SECTION["bank conflict"]
    )
    assert _search(search_client, "***")["message"]  # no words at all: said so, no results


def test_empty_and_too_long_queries_are_explained(search_client: TestClient) -> None:
    for params in ({}, {"q": ""}, {"q": "   "}):
        answer = search_client.get("/api/v1/search", params=params)
        assert answer.status_code == 400 and "word" in answer.json()["detail"]
        page = search_client.get("/search", params=params)
        assert page.status_code == 200 and 'id="search-page-q"' in page.text
    long = "tile " * 50
    answer = search_client.get("/api/v1/search", params={"q": long})
    assert answer.status_code == 400 and "at most 200" in answer.json()["detail"]
    page = search_client.get("/search", params={"q": long})
    assert page.status_code == 400 and "at most 200" in page.text


def test_the_results_page_links_to_the_sections(search_client: TestClient) -> None:
    page = search_client.get("/search", params={"q": "bank conflict"})
    assert page.status_code == 200
    html = page.text
    assert 'href="/book/p1/transpose#bank-conflicts"' in html
    assert "<mark>Bank</mark> <mark>conflicts</mark>" in html
    assert 'href="/book/p1/transpose#cell-ch06-transpose"' in html  # the problem's cell
    assert 'value="bank conflict"' in html  # the header's box keeps the query
    # The section anchor exists on the chapter page it points to.
    assert 'id="bank-conflicts"' in search_client.get("/book/p1/transpose").text


def test_the_header_has_the_search_form(client: TestClient) -> None:
    html = client.get("/book/p1/transpose").text
    form = re.search(r'<form class="site-search"[^>]*>(.*?)</form>', html, re.S)
    assert form is not None
    assert 'action="/search"' in form.group(0) and 'method="get"' in form.group(0)
    assert 'name="q"' in form.group(1) and 'type="submit"' in form.group(1)
    assert "style=" not in form.group(0) and "<script" not in form.group(0)
    csp = client.get("/search", params={"q": "tile"}).headers["content-security-policy"]
    assert "'unsafe-inline'" not in csp.split("script-src")[-1].split(";")[0]


def _small_book(root: Path, word: str) -> Path:
    part = root / "p1"
    part.mkdir(parents=True, exist_ok=True)
    (part / "part.toml").write_text('title = "Basics"\n')
    (part / "01-tiles.md").write_text(
        "---\ntitle: Tiles\nslug: tiles\nsummary: About tiles.\n---\n\n"
        f"Intro text.\n\n## Escaping\n\nThe test `a<b && c>d` keeps {word} safe.\n"
    )
    return root


def test_the_index_follows_the_book_and_escapes_its_text(
    tmp_path: Path, make_settings: Callable[..., Settings]
) -> None:
    book = _small_book(tmp_path / "book", "zanzibar")
    with TestClient(create_app(make_settings(book_dir=book), FakeExecutor())) as client:
        hit = _search(client, "zanzibar")["sections"][0]
        assert hit["url"] == "/book/p1/tiles#escaping"
        assert "a&lt;b &amp;&amp; c&gt;d" in hit["snippet_html"]
        assert "a<b && c>d" in hit["snippet"]
        chapter = book / "p1" / "01-tiles.md"
        _small_book(tmp_path / "book", "quokka")
        later = time.time_ns() + 10**9  # a new modification time, however coarse the clock
        os.utime(chapter, ns=(later, later))
        assert _search(client, "zanzibar")["sections"] == []
        assert _search(client, "quokka")["sections"][0]["url"] == "/book/p1/tiles#escaping"
