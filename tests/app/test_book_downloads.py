"""The contents page's download links: the server builds the edition's EPUB (and PDF) once,
answers "being built" until then, serves the file after, and reports a failed build."""

from __future__ import annotations

import shutil
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

from fastapi.testclient import TestClient

from kplay.app.main import create_app
from kplay.app.services.bookfiles import BookFiles, fingerprint
from kplay.config import Settings
from tests.app.fakes import FakeExecutor


def _wait_ready(client: TestClient, url: str, limit_s: float = 90) -> object:
    deadline = time.monotonic() + limit_s
    while True:
        answer = client.get(url)
        if answer.status_code != 202 or time.monotonic() > deadline:
            return answer
        time.sleep(0.5)


def test_the_contents_page_links_both_formats(client: TestClient) -> None:
    page = client.get("/").text
    assert 'href="/downloads/book.pdf"' in page and 'href="/downloads/book.epub"' in page


def test_the_epub_is_built_once_then_downloaded(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    app = create_app(make_settings(cache_dir=tmp_path / "cache"), FakeExecutor())
    with TestClient(app) as client:
        first = client.get("/downloads/book.epub")
        assert first.status_code == 202, first.text
        assert first.headers["retry-after"] == "5"
        assert "being built" in first.text and 'http-equiv="refresh"' in first.text
        done = _wait_ready(client, "/downloads/book.epub")
        assert done.status_code == 200, done.text  # type: ignore[attr-defined]
        assert done.headers["content-type"] == "application/epub+zip"  # type: ignore[attr-defined]
        assert "writing-kernels-with-ai.epub" in done.headers["content-disposition"]  # type: ignore[attr-defined]
        saved = tmp_path / "dl.epub"
        saved.write_bytes(done.content)  # type: ignore[attr-defined]
        with zipfile.ZipFile(saved) as z:
            assert z.read("mimetype") == b"application/epub+zip"
            # The cells link back to this server, the one the reader downloaded from.
            chapters = [n for n in z.namelist() if n.endswith(".xhtml") and "-" in n]
            assert any(b"http://testserver/book/" in z.read(n) for n in chapters)
        built = list((tmp_path / "cache" / "book-files").rglob("*.epub"))
        assert len(built) == 1
        again = client.get("/downloads/book.epub")
        assert again.status_code == 200 and again.content == done.content  # type: ignore[attr-defined]
        assert list((tmp_path / "cache" / "book-files").rglob("*.epub")) == built


def test_an_unknown_format_is_a_clear_404(client: TestClient) -> None:
    answer = client.get("/downloads/book.docx")
    assert answer.status_code == 404
    assert "PDF and EPUB" in answer.text


def test_a_broken_book_is_reported_not_rebuilt(tmp_path: Path) -> None:
    book = tmp_path / "book"
    shutil.copytree(Settings().book_dir, book)
    (book / "terms.toml").write_text('[[term]]\nforms = ["x"]\n')  # a term with no name
    files = BookFiles(tmp_path / "files", book, Settings().results_dir)
    assert files.status("epub", "http://x").state == "building"
    status = files.wait("epub", "http://x", timeout=90)
    assert status.state == "failed"
    assert "could not be built" in status.message and "has no name" in status.message
    assert not list((tmp_path / "files").rglob("*.part"))  # no half file left behind
    # Mending the book changes the edition: the next request builds again.
    before = fingerprint(book, Settings().results_dir, "http://x")
    (book / "terms.toml").write_text('[[term]]\nname = "roofline"\n')
    assert fingerprint(book, Settings().results_dir, "http://x") != before
    assert files.status("epub", "http://x").state == "building"
    assert files.wait("epub", "http://x", timeout=90).state == "ready"
