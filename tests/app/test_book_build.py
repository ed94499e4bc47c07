"""`kplay book build`: the book as a static site and as an EPUB 3, without a server.

The whole book is built once for the module through the command line, then read back from
disk: a page per chapter, every link and image resolving, the app's own prose and measured
figures, every cell's source with its link into the playground, and an EPUB that holds the
same chapters and figures."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import time
import zipfile
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from ebooklib import ITEM_DOCUMENT, ITEM_IMAGE, epub
from fastapi.testclient import TestClient
from lxml import etree
from markupsafe import escape

from kplay.app import benchrefs
from kplay.app.book import Book, Chapter
from kplay.app.bookbuild import Links, Sources, build_site, make_edition
from kplay.app.bookcard import References
from kplay.cli import main
from kplay.config import Settings
from kplay.kernels.catalog import load_catalog
from kplay.kernels.problem import ProblemSpec
from tests.app.conftest import services_required

PLAYGROUND = "https://play.example.org"
DATE, COMMIT = "2026-11-30", "0123456789ab"
BUILD_LIMIT_S = 120  # the whole book; it takes a few seconds on a 2-core machine


@dataclass(frozen=True)
class Built:
    site: Path
    epub: Path
    seconds: float
    book: Book
    problems: dict[str, ProblemSpec]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    out = tmp_path_factory.mktemp("book-build")
    site, book_file = out / "site", out / "book.epub"
    argv = ["book", "build", "--html", str(site), "--epub", str(book_file)]
    argv += ["--playground-url", PLAYGROUND + "/", "--date", DATE, "--commit", COMMIT]
    start = time.monotonic()
    assert main(argv) == 0
    seconds = time.monotonic() - start
    settings = Settings()
    problems = load_catalog()
    return Built(site, book_file, seconds, Book(settings.book_dir, problems), problems)


class _Refs(HTMLParser):
    """Every href and src of a page, and every id it defines."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str]] = []
        self.ids: set[str] = set()
        self.scripts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value is not None:
                self.refs.append((tag, value))
            if name == "id" and value:
                self.ids.add(value)
        if tag == "script":
            self.scripts.append(dict(attrs).get("src") or "(inline)")


def _parse(path: Path) -> _Refs:
    parser = _Refs()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def _page(built: Built, chapter: Chapter) -> Path:
    return built.site / chapter.part_dir / f"{chapter.slug}.html"


def test_the_build_takes_less_than_two_minutes(built: Built) -> None:
    assert built.seconds < BUILD_LIMIT_S, f"the book took {built.seconds:.1f} s to build"


def test_a_page_per_chapter_and_a_contents_page(built: Built) -> None:
    chapters = built.book.chapters()
    assert len(chapters) > 10
    index = (built.site / "index.html").read_text(encoding="utf-8")
    assert f"Edition of {DATE}, commit {COMMIT}" in index
    for chapter in chapters:
        page = _page(built, chapter).read_text(encoding="utf-8")
        assert f"<title>{escape(chapter.title)} · " in page
        assert f'href="{chapter.part_dir}/{chapter.slug}.html"' in index
    pages = sorted(p.relative_to(built.site) for p in built.site.rglob("*.html"))
    assert len(pages) == len(chapters) + 2  # the contents and the index of terms


def test_every_internal_link_and_image_resolves_on_disk(built: Built) -> None:
    checked = 0
    for page in built.site.rglob("*.html"):
        for tag, ref in _parse(page).refs:
            parts = urlsplit(ref)
            if parts.scheme:
                assert parts.scheme == "https" and ref.startswith(PLAYGROUND), (page, ref)
                continue
            assert not ref.startswith("/"), f"{page}: {ref} needs a server"
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            assert target.is_file(), f"{page}: <{tag}> {ref} is not on disk"
            if parts.fragment and target.suffix == ".html":
                assert parts.fragment in _parse(target).ids, f"{page}: no #{parts.fragment}"
            checked += 1
    figures = list((built.site / "static" / "book").glob("*.svg"))
    assert checked > 300 and len(figures) >= 20


def test_the_pages_need_no_server(built: Built) -> None:
    for page in built.site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "<form" not in text and "data-run-url" not in text, page
        assert set(_parse(page).scripts) <= {"static/js/theme.js", "../static/js/theme.js"}


_MARK = re.compile(r'<span class="index-mark" id="[^"]+"></span>')
_CAPTION = re.compile(r'<caption class="table-no" id="[^"]+">Table [0-9.]+</caption>')
_FIGURE = re.compile(
    r'<figure class="book-figure" id="[^"]+">(<img [^>]+>)<figcaption>.*?</figcaption></figure>'
)


def _unmarked(page: str) -> str:
    """A built page without what the build adds to the prose: index anchors, table numbers,
    figure frames (each figure back to its image in a paragraph, as the app shows it)."""
    page = _CAPTION.sub("", _MARK.sub("", page))
    return _FIGURE.sub(lambda m: f"<p>{m.group(1)}</p>", page)


def test_the_prose_is_the_apps_with_links_made_relative(built: Built, client: TestClient) -> None:
    links = Links(built.book, PLAYGROUND, "{part_dir}/{slug}.html", "index.html")
    for chapter in built.book.chapters():
        served = client.get(chapter.url).text
        page = _unmarked(_page(built, chapter).read_text(encoding="utf-8"))
        prose = [seg for seg in chapter.segments if isinstance(seg, str)]
        assert prose, chapter.slug
        for seg in prose:
            assert seg in served, f"{chapter.slug}: the app does not show this segment"
            assert links.rewrite(seg, "../") in page, f"{chapter.slug}: a segment differs"


def test_measured_figures_are_filled_in_as_the_app_fills_them(built: Built) -> None:
    settings = Settings()
    values = []
    for chapter in built.book.chapters():
        page = _page(built, chapter).read_text(encoding="utf-8")
        assert "[[bench:" not in page
        for m in benchrefs.PLACEHOLDER.finditer(chapter.path.read_text(encoding="utf-8")):
            value = benchrefs.lookup(settings.results_dir, *m.groups())
            assert value in page, f"{chapter.slug}: {m.group(0)} = {value} is not shown"
            values.append(value)
    assert [v for v in values if v != benchrefs.MISSING], "no chapter quotes a measured figure"


def _cell_text(page: str, cell_id: str) -> str:
    found = re.search(
        rf'<section class="kcell kcell-static" id="cell-{re.escape(cell_id)}".*?'
        r"</section>",
        page,
        re.DOTALL,
    )
    assert found, f"no cell {cell_id}"
    return found.group(0)


def test_every_cell_shows_its_source_and_its_run_online_link(built: Built) -> None:
    cells = 0
    for chapter in built.book.chapters():
        page = _page(built, chapter).read_text(encoding="utf-8")
        for cell in chapter.cells:
            section = _cell_text(page, cell.id)
            text = html.unescape(re.sub(r"<[^>]+>", "", section))
            source = built.problems[cell.problem].starter(cell.backend)
            if getattr(cell.exercise, "kind", None) == "fix":  # a fix cell: its wrong kernel
                source = cell.exercise.starter_text
            assert source.strip() in text, f"{cell.id}: the starter is not shown"
            assert '<span class="' in section, f"{cell.id}: the source is not highlighted"
            url = f"{PLAYGROUND}/book/{chapter.part_dir}/{chapter.slug}#cell-{cell.id}"
            assert f'href="{url}">Run this online</a>' in section
            cells += 1
    assert cells >= 20


def test_the_epub_holds_every_chapter_and_figure(built: Built) -> None:
    with zipfile.ZipFile(built.epub) as z:
        assert z.namelist()[0] == "mimetype"
        assert z.read("mimetype") == b"application/epub+zip"
    book = epub.read_epub(str(built.epub))
    assert book.get_metadata("DC", "title")[0][0] == "Writing Kernels with AI"
    assert book.get_metadata("DC", "date")[0][0] == DATE
    assert COMMIT in book.get_metadata("DC", "source")[0][0]
    docs = {item.get_name(): item for item in book.get_items_of_type(ITEM_DOCUMENT)}
    assert "nav.xhtml" in docs
    images = {item.get_name() for item in book.get_items_of_type(ITEM_IMAGE)}
    for chapter in built.book.chapters():
        item = docs[f"{chapter.part_dir}-{chapter.slug}.xhtml"]
        tree = etree.fromstring(item.get_content())  # well-formed XHTML
        text = "".join(tree.itertext())
        assert chapter.title in text
        for cell in chapter.cells:
            url = f"{PLAYGROUND}/book/{chapter.part_dir}/{chapter.slug}#cell-{cell.id}"
            assert url.encode() in item.get_content()
        for src in re.findall(rb'src="(static/book/[^"]+)"', item.get_content()):
            assert src.decode() in images, f"{chapter.slug}: {src!r} is not in the EPUB"
    shown = {
        m
        for c in built.book.chapters()
        for m in re.findall(r"/static/(book/[^)\s]+\.svg)", c.path.read_text(encoding="utf-8"))
    }
    assert shown and {f"static/{name}" for name in shown} <= images


def test_the_epub_passes_epubcheck(built: Built) -> None:
    jar = Path("/usr/share/java/epubcheck.jar")
    if shutil.which("java") is None or not jar.is_file():
        # .ci/run installs it and sets KPLAY_REQUIRE_SERVICES: there the check must run.
        assert not services_required(), "epubcheck is not installed (apt-get install epubcheck)"
        pytest.skip("epubcheck is not installed (apt-get install epubcheck)")
    done = subprocess.run(
        ["java", "-jar", str(jar), str(built.epub)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No errors or warnings detected" in done.stdout, done.stdout


CHAPTER = """---
title: {title}
slug: {slug}
---

See [the other chapter](/book/{other}#far) and [its old address](/book/{other}), the
[catalog](/problems) and a figure ![a roof](/static/book/p1_roofline.svg).

The copy ran at [[bench:fig.copy.gbs]] GB/s.

## Far

The end.
"""


def test_links_between_chapters_and_figures_of_a_small_book(tmp_path: Path) -> None:
    folder = tmp_path / "book" / "p1"
    folder.mkdir(parents=True)
    (folder / "part.toml").write_text('title = "One"\n')
    for name, slug, other in (("01-a.md", "aaa", "bbb"), ("02-b.md", "bbb", "aaa")):
        text = CHAPTER.format(title=slug.upper(), slug=slug, other=other)
        (folder / name).write_text(text)
    results = tmp_path / "results"
    results.mkdir()
    (results / "fig.json").write_text('{"copy": {"gbs": 4219.6}}')
    book = Book(tmp_path / "book", {}, results)
    edition = make_edition(book, PLAYGROUND, DATE, COMMIT)
    src = Sources(book, {}, edition, References([]), [])
    pages = build_site(src, tmp_path / "site")
    page = (tmp_path / "site" / "p1" / "aaa.html").read_text()
    assert 'href="../p1/bbb.html#far"' in page and 'href="../p1/bbb.html"' in page
    assert f'href="{PLAYGROUND}/problems"' in page
    assert 'src="../static/book/p1_roofline.svg"' in page
    assert "4,220 GB/s" in page  # benchrefs.format_value, as the app shows it
    assert (tmp_path / "site" / "static" / "book" / "p1_roofline.svg").is_file()
    assert len(pages) == 3  # no terms file: no index of terms


def test_book_build_without_an_output_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["book", "build"]) == 2
    assert "give --html DIR, --epub FILE and/or --pdf FILE" in capsys.readouterr().err


def test_an_epub_without_ebooklib_says_which_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("kplay.app.bookbuild.find_spec", lambda name: None)
    assert main(["book", "build", "--epub", str(tmp_path / "b.epub")]) == 2
    assert "pip install 'kernel-playground[book]'" in capsys.readouterr().err
    assert not (tmp_path / "b.epub").exists()


def test_the_edition_names_the_checkouts_commit_only_for_tracked_files(tmp_path: Path) -> None:
    from kplay.app.bookbuild import source_commit

    root = Path(__file__).resolve().parents[2]
    head = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    if not head:
        pytest.skip("not a git checkout")
    assert head.startswith(source_commit(root / "book")) and len(source_commit(root / "book")) == 12
    assert source_commit(tmp_path) == "unknown"
