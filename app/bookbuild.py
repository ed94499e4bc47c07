"""The book as files: a static site that needs no server (`kplay book build --html DIR`).

Each chapter is rendered by the app's own `chapter.html`, from the same `Book` (so the
measured figures are filled in by `app.benchrefs` exactly as the app fills them). Two
templates are put in front of the app's: a page frame without the server's search, scripts
and forms, and a kernel cell shown read-only as its starter source, highlighted as the
chapters' code is, with a link that opens the cell in a running playground. Links the app
writes from the site root are then made relative, so the pages work from the file system;
a link to a page only the server has (the source view, the catalog) goes to the playground.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.util import find_spec
from pathlib import Path

from jinja2 import ChoiceLoader, DictLoader, Environment

from kplay.app.book import Book, Chapter, Part
from kplay.app.bookcard import References, Snapshot
from kplay.app.bookindex import Index, Term, load_terms, number_figures, number_tables
from kplay.app.bookmd import CellSpec, highlight_code
from kplay.app.render import STATIC_DIR, TEMPLATES_DIR, make_templates
from kplay.app.services.problems import backend_title, editor_language
from kplay.app.services.views import BOOK_TITLE
from kplay.kernels.problem import ProblemSpec

DEFAULT_PLAYGROUND = "http://127.0.0.1:8000"
# Copied whole into every site: the page styles, the fonts, the figures, the theme switch.
SITE_FILES = (
    "favicon.svg",
    "js/theme.js",
    "css/book.css",
    "css/components.css",
    "css/catalog.css",
    "css/bookfiles.css",
)
SITE_FOLDERS = ("fonts", "book")


def _template(name: str) -> str:
    """A template of the built copies (templates/bookfiles/), put in front of the app's."""
    return (TEMPLATES_DIR / "bookfiles" / name).read_text(encoding="utf-8")


# Notes to the authors in the chapters, left out of the EPUB and PDF (XML allows no "--" in one).
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
TERMS_URL = "/book/terms"  # the index of terms, as the built copies' templates link to it
_ATTR = re.compile(r'(\s(?:href|src)=")(/[^"]*)(")')


@dataclass(frozen=True)
class Edition:
    """What a built copy says about itself: which book, when, from which commit."""

    title: str
    date: str
    commit: str
    playground: str

    @property
    def line(self) -> str:
        return f"Edition of {self.date}, commit {self.commit}"

    @property
    def identifier(self) -> str:
        return f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, f'{self.title}/{self.commit}')}"


def _git(folder: Path, *args: str) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def source_commit(folder: Path) -> str:
    """The short commit of the checkout whose files `folder` holds, or "unknown" (an installed
    copy, even one in a virtual environment inside some other checkout)."""
    if not _git(folder, "ls-files", "--", "."):
        return "unknown"
    return _git(folder, "rev-parse", "--short=12", "HEAD") or "unknown"


def make_edition(
    book: Book, playground: str, date: str | None = None, commit: str | None = None
) -> Edition:
    return Edition(
        title=BOOK_TITLE,
        date=date or datetime.now(UTC).date().isoformat(),
        commit=commit or source_commit(book.book_dir),
        playground=playground.rstrip("/"),
    )


# ------------------------------------------------------------------ cells and pages


@dataclass(frozen=True)
class StaticCell:
    """A kernel cell as text: its starter in the cell's own backend, and where to run it."""

    spec: CellSpec
    problem_title: str
    backend_title: str
    lang: str
    source: str
    highlighted: str
    others: list[str]
    hints: list[str]
    run_url: str
    snapshot: Snapshot | None = None


def run_url(playground: str, chapter: Chapter, cell_id: str) -> str:
    return f"{playground.rstrip('/')}{chapter.url}#cell-{cell_id}"


def static_cell(
    spec: CellSpec,
    problem: ProblemSpec,
    chapter: Chapter,
    playground: str,
    refs: References | None = None,
) -> StaticCell:
    fix = spec.exercise if getattr(spec.exercise, "kind", None) == "fix" else None
    source = fix.starter_text if fix else problem.starter(spec.backend)  # a fix: its wrong kernel
    # The editor's language, named as a chapter's fence would name it (`.cu` files are CUDA).
    lang = "cuda" if editor_language(spec.backend) == "cpp" else "python"
    return StaticCell(
        spec=spec,
        problem_title=problem.title,
        backend_title=backend_title(spec.backend),
        lang=lang,
        source=source,
        highlighted=highlight_code(source, lang),
        others=[backend_title(b) for b in spec.backends if b != spec.backend],
        hints=list(problem.hints),
        run_url=run_url(playground, chapter, spec.id),
        snapshot=refs.snapshot(spec.problem, spec.backend) if refs else None,
    )


@dataclass(frozen=True)
class StaticChapterPage:
    """The fields of the app's ChapterPage that chapter.html reads, cells made static."""

    title: str
    chapter: Chapter
    previous: Chapter | None
    next: Chapter | None
    segments: list[str | StaticCell]


def chapter_page(
    book: Book,
    problems: Mapping[str, ProblemSpec],
    chapter: Chapter,
    playground: str,
    refs: References | None = None,
    index: Index | None = None,
) -> StaticChapterPage:
    """The chapter as a built copy shows it: cells static; with `index`, figures numbered and
    the index's terms marked in the prose."""
    before, after = book.neighbours(chapter.slug)
    segments: list[str | StaticCell] = []
    figures = tables = 0
    for seg in chapter.segments:
        if not isinstance(seg, str):
            seg = static_cell(seg, problems[seg.problem], chapter, playground, refs)
        elif index is not None:
            seg, figures = number_figures(seg, chapter, figures)
            seg, tables = number_tables(seg, chapter, tables)
            seg = index.mark(seg, chapter)
        segments.append(seg)
    return StaticChapterPage(chapter.title, chapter, before, after, segments)


CELL = _template("cell.html")

BASE = _template("base.html")

INDEX = _template("index.html")


@dataclass(frozen=True)
class ContentsPage:
    title: str
    parts: list[Part]


def environment(overrides: Mapping[str, str]) -> Environment:
    """The app's template environment (filters, globals) with `overrides` found first."""
    env = make_templates().env
    env.loader = ChoiceLoader([DictLoader(dict(overrides)), env.loader])  # type: ignore[list-item]
    return env


# ------------------------------------------------------------------ links


class Links:
    """Turns the app's root-relative links into a built copy's: a chapter's file, the
    contents page, a copied static file (remembered in `used`), or the playground."""

    def __init__(
        self,
        book: Book,
        playground: str,
        chapter_file: str,
        index_file: str,
        index_anchors: bool = True,
        terms_file: str = "terms.html",
    ) -> None:
        self.by_slug = book.index().by_slug
        self.playground = playground.rstrip("/")
        self.chapter_file = chapter_file  # a format string of part_dir and slug
        self.index_file = index_file
        self.index_anchors = index_anchors  # False: the contents page has no part anchors
        self.terms_file = terms_file  # the index of terms
        self.used: set[str] = set()

    def target(self, url: str) -> str:
        path, hash_, fragment = url.partition("#")
        path = path.partition("?")[0]
        tail = f"#{fragment}" if hash_ else ""
        if path == "/":
            return self.index_file + (tail if self.index_anchors else "")
        if path == TERMS_URL:
            return self.terms_file + tail
        if path.startswith("/static/") and (STATIC_DIR / path[len("/static/") :]).is_file():
            name = path[len("/static/") :]
            self.used.add(name)
            return f"static/{name}{tail}"
        found = re.fullmatch(r"/book/(?:p\d+/)?([a-z0-9-]+)", path)
        chapter = self.by_slug.get(found.group(1)) if found else None
        if chapter is not None:
            return self.chapter_file.format(part_dir=chapter.part_dir, slug=chapter.slug) + tail
        return self.playground + url

    def rewrite(self, html: str, prefix: str) -> str:
        """`html` with every href and src from the root made relative to a page `prefix`
        folders deep (a link into the playground stays absolute)."""

        def one(m: re.Match[str]) -> str:
            target = self.target(m.group(2))
            if "://" not in target:
                target = prefix + target
            return m.group(1) + target + m.group(3)

        return _ATTR.sub(one, html)


# ------------------------------------------------------------------ the site


def copy_static(names: set[str] | list[str], dest: Path) -> None:
    for name in sorted(names):
        target = dest / "static" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(STATIC_DIR / name, target)


@dataclass(frozen=True)
class Sources:
    """What every format is built from: the book, its problems, the edition, the recorded
    reference runs and the index's terms."""

    book: Book
    problems: Mapping[str, ProblemSpec]
    edition: Edition
    refs: References
    terms: list[Term]

    def page(self, chapter: Chapter, index: Index) -> StaticChapterPage:
        return chapter_page(
            self.book, self.problems, chapter, self.edition.playground, self.refs, index
        )


def build_site(src: Sources, dest: Path) -> list[Path]:
    """Writes the site to `dest` (index.html, terms.html, p<N>/<slug>.html, static/); returns
    the pages."""
    dest = Path(dest)
    env = environment(
        {
            "base.html": BASE,
            "fragments/cell.html": CELL,
            "static_index.html": INDEX,
            "static_terms.html": _template("terms.html"),
        }
    )
    book, edition = src.book, src.edition
    links = Links(book, edition.playground, "{part_dir}/{slug}.html", "index.html")
    index = Index(src.terms)
    pages: list[Path] = []
    for chapter in book.chapters():
        page = src.page(chapter, index)
        html = env.get_template("chapter.html").render(page=page, edition=edition)
        path = dest / chapter.part_dir / f"{chapter.slug}.html"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(links.rewrite(html, "../"), encoding="utf-8")
        pages.append(path)
    contents = ContentsPage(edition.title, book.parts())
    html = env.get_template("static_index.html").render(
        page=contents, edition=edition, catalog=src.problems, has_index=bool(index.used())
    )
    first = dest / "index.html"
    first.parent.mkdir(parents=True, exist_ok=True)
    first.write_text(links.rewrite(html, ""), encoding="utf-8")
    pages.insert(0, first)
    if index.used():
        listing = index.render(lambda ch, anchor: f"{ch.part_dir}/{ch.slug}.html#{anchor}")
        html = env.get_template("static_terms.html").render(
            page=ContentsPage("Index", []), edition=edition, listing=listing
        )
        terms_page = dest / "terms.html"
        terms_page.write_text(links.rewrite(html, ""), encoding="utf-8")
        pages.insert(1, terms_page)
    folders = [p.relative_to(STATIC_DIR) for f in SITE_FOLDERS for p in (STATIC_DIR / f).rglob("*")]
    whole = {str(p) for p in folders if (STATIC_DIR / p).is_file() and p.suffix != ".py"}
    copy_static(links.used | set(SITE_FILES) | whole, dest)
    return pages


def load_sources(
    playground: str = DEFAULT_PLAYGROUND,
    date: str | None = None,
    commit: str | None = None,
    book_dir: Path | None = None,
    results_dir: Path | None = None,
) -> Sources:
    """The book of `book_dir` and `results_dir` (default: the settings'), ready to build. A
    broken chapter, problem or terms file raises its BookError, ProblemLoadError or
    ValueError."""
    from kplay.config import Settings
    from kplay.kernels.catalog import load_catalog

    settings = Settings()
    book_dir = book_dir or settings.book_dir
    results_dir = results_dir or settings.results_dir
    catalog = load_catalog()
    book = Book(book_dir, catalog, results_dir)
    return Sources(
        book=book,
        problems=catalog,
        edition=make_edition(book, playground, date, commit),
        refs=References.from_folder(results_dir),
        terms=load_terms(book_dir),
    )


def build_book(
    html: Path | None,
    epub: Path | None,
    pdf: Path | None = None,
    playground: str = DEFAULT_PLAYGROUND,
    date: str | None = None,
    commit: str | None = None,
) -> list[str]:
    """`kplay book build`: the configured book as a site in `html`, an EPUB file `epub` and a
    PDF file `pdf` (any of them); returns what was written, a line each."""
    if epub is not None and find_spec("ebooklib") is None:
        raise ValueError("an EPUB needs ebooklib: pip install 'kernel-playground[book]'")
    if pdf is not None and find_spec("weasyprint") is None:
        raise ValueError("a PDF needs WeasyPrint: pip install 'kernel-playground[book]'")
    src = load_sources(playground, date, commit)
    done = []
    if html is not None:
        pages = build_site(src, html)
        done.append(f"site: {len(pages)} pages in {html} (open {html / 'index.html'})")
    if epub is not None:
        from kplay.app.bookepub import build_epub

        done.append(f"EPUB: {build_epub(src, epub)}")
    if pdf is not None:
        from kplay.app.bookpdf import build_pdf

        done.append(f"PDF: {build_pdf(src, pdf)}")
    return done
