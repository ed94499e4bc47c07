"""Full-text search over the book's sections and the problem catalog.

Every `##`/`###` section of a chapter (and the text before its first heading) is one entry,
addressed by the chapter's URL and the heading's anchor; every problem is one entry,
addressed by the first cell that embeds it (or by nothing, when no chapter does yet).

Two stores behind one interface (app.services.searchstores):
- embedded mode (SQLite): an FTS5 table in a private in-memory database of this process;
- distributed mode (PostgreSQL): the `search_entries` table of migration 0002, whose
  weighted `tsvector` column PostgreSQL keeps; every web process compares the book's
  fingerprint with the one stored beside the rows and rewrites them when they differ.

Both are filled lazily, on the first search, and again whenever the book changes. A query
is cut into plain words (no FTS syntax reaches either engine); every word must match, and
only when no entry has them all are entries with any of them shown. A match in a heading
outranks any match in the text only, and then one in the chapter's title; the engine's rank
(bm25 over weighted columns, ts_rank over weighted lexemes) orders entries within a tier.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from html.parser import HTMLParser

from markupsafe import Markup, escape
from sqlalchemy import Engine

from kplay.app.book import Book, CellSpec, Chapter
from kplay.app.render import roman
from kplay.app.services.searchstores import (
    START,
    STOP,
    Entry,
    Fts5Store,
    PostgresStore,
    Row,
    Store,
)
from kplay.kernels.problem import ProblemSpec

__all__ = ["Entry", "Hit", "QueryError", "SearchIndex", "SearchPage", "SearchResults"]

MAX_QUERY_CHARS = 200
MAX_TERMS = 10
SECTION_LIMIT = 20
PROBLEM_LIMIT = 8
# Common English words carry no meaning in a query (PostgreSQL's 'english' configuration
# drops these and more; FTS5 would make every one of them a required word).
STOPWORDS = frozenset(
    "a an and are as at be but by for from has have how i if in into is it its of on or "
    "so than that the their then there these they this to was we were what when where "
    "which while who why will with you your".split()
)
_WORD = re.compile(r"[^\W_]+")
_MARKED = re.compile(f"{START}(.*?){STOP}", re.S)


class QueryError(ValueError):
    """A query that cannot be searched: empty or too long. The message says which."""


@dataclass(frozen=True)
class Hit:
    kind: str
    title: str
    title_html: Markup
    chapter: str
    part: str
    url: str | None
    snippet: str
    snippet_html: Markup


@dataclass(frozen=True)
class SearchResults:
    query: str
    terms: tuple[str, ...]
    sections: list[Hit] = field(default_factory=list)
    problems: list[Hit] = field(default_factory=list)
    every_word: bool = True
    message: str | None = None


@dataclass(frozen=True)
class SearchPage:
    title: str
    query: str
    results: SearchResults | None
    message: str | None


# ------------------------------------------------------------------ entries from the book


_SKIP_CLASSES = ("header-anchor", "code-lang")
_BLOCKS = frozenset("p li h2 h3 h4 td th tr div blockquote br dt dd figcaption section".split())
_VOID = frozenset("area base br col embed hr img input link meta source track wbr".split())


class _Sections(HTMLParser):
    """A chapter's prose HTML cut at its anchored h2/h3 headings, as plain text."""

    def __init__(self, chapter: Chapter) -> None:
        super().__init__(convert_charrefs=True)
        # [heading, anchor, text parts]; the first is the text before any heading.
        intro = [chapter.summary] if chapter.summary else []
        self.drafts: list[tuple[list[str], str | None, list[str]]] = [
            ([chapter.title], None, intro)
        ]
        self._skip = 0
        self._in_heading = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skip:
            self._skip += tag not in _VOID
            return
        found = dict(attrs)
        classes = (found.get("class") or "").split()
        if tag == "pre" or any(c in classes for c in _SKIP_CLASSES):
            self._skip = 1
        elif tag in ("h2", "h3") and found.get("id"):
            self.drafts.append(([], found["id"], []))
            self._in_heading = True

    def handle_endtag(self, tag: str) -> None:
        if self._skip:
            self._skip -= 1
            return
        if tag in ("h2", "h3"):
            self._in_heading = False
        if tag in _BLOCKS:
            self.drafts[-1][2].append(" ")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            heading, _, body = self.drafts[-1]
            (heading if self._in_heading else body).append(data)

    def add_cell(self, title: str) -> None:
        self.drafts[-1][2].append(f" {title} ")


def _plain(parts: list[str]) -> str:
    return " ".join("".join(parts).replace(START, " ").replace(STOP, " ").split())


def _part_name(chapter: Chapter) -> str:
    name = f"Part {roman(chapter.part)}"  # as the contents and the chapter pages write it
    return f"{name} · {chapter.part_title}" if chapter.part_title else name


def _chapter_entries(
    chapter: Chapter,
    problems: Mapping[str, ProblemSpec],
    first_cells: dict[str, tuple[str, str]],
) -> list[Entry]:
    parser = _Sections(chapter)
    for segment in chapter.segments:
        if isinstance(segment, str):
            parser.feed(segment)
            continue
        cell: CellSpec = segment
        problem = problems.get(cell.problem)
        parser.add_cell(cell.title or (problem.title if problem else ""))
        first_cells.setdefault(cell.problem, (f"{chapter.url}#cell-{cell.id}", chapter.label))
    parser.close()
    return [
        Entry(
            kind="section",
            heading=_plain(heading),
            chapter=chapter.label,
            keywords="",
            body=_plain(body),
            url=f"{chapter.url}#{anchor}" if anchor else chapter.url,
            part=_part_name(chapter),
        )
        for heading, anchor, body in parser.drafts
        if anchor or _plain(body)
    ]


def build_entries(book: Book, problems: Mapping[str, ProblemSpec]) -> list[Entry]:
    """Every section of the book in reading order, then every problem by slug."""
    entries: list[Entry] = []
    first_cells: dict[str, tuple[str, str]] = {}
    for chapter in book.chapters():
        entries += _chapter_entries(chapter, problems, first_cells)
    for slug in sorted(problems):
        spec = problems[slug]
        url, label = first_cells.get(slug, ("", ""))
        entries.append(
            Entry(
                kind="problem",
                heading=_plain([spec.title]),
                chapter=label,
                keywords=_plain([slug.replace("_", " "), " ", " ".join(spec.tags)]),
                body=_plain([spec.summary, " ", " ".join(spec.hints)]),
                url=url or f"/problems/{slug}",  # the catalog cell of a problem no chapter embeds
                part="Problem catalog",
            )
        )
    return entries


def fingerprint(entries: list[Entry]) -> str:
    digest = hashlib.sha256()
    for e in entries:
        for value in (e.kind, e.heading, e.chapter, e.keywords, e.body, e.url or "", e.part):
            digest.update(value.encode() + b"\0")
    return digest.hexdigest()


def terms_of(query: str) -> tuple[str, ...]:
    """The query's words, lower-cased, without FTS syntax, common words or repeats."""
    words = dict.fromkeys(w.lower() for w in _WORD.findall(query))
    return tuple(w for w in words if w not in STOPWORDS)[:MAX_TERMS]


# ------------------------------------------------------------------ the index


def _marked_html(marked: str) -> Markup:
    return Markup(str(escape(marked)).replace(START, "<mark>").replace(STOP, "</mark>"))


def _words(marked: str) -> int:
    return len({m.lower() for m in _MARKED.findall(marked)})


def _tier(row: Row) -> tuple[int, int]:
    """How many different words of the query the heading, then the chapter's title, matched."""
    return _words(row.heading_marked), _words(row.chapter_marked)


def _hit(row: Row) -> Hit:
    snippet = row.snippet_marked
    return Hit(
        kind=row.kind,
        title=row.heading,
        title_html=_marked_html(row.heading_marked),
        chapter=row.chapter,
        part=row.part,
        url=row.url,
        snippet=snippet.replace(START, "").replace(STOP, ""),
        snippet_html=_marked_html(snippet),
    )


class SearchIndex:
    """The search over one book and catalog, on one database. Safe to share between threads."""

    def __init__(
        self, book: Book, problems: Mapping[str, ProblemSpec], engine: Engine | None = None
    ) -> None:
        self.book = book
        self.problems = problems
        self.engine = engine
        self.store: Store = (
            PostgresStore(engine)
            if engine is not None and engine.dialect.name == "postgresql"
            else Fts5Store()
        )
        self._lock = threading.Lock()
        self._seen: object = None

    def _sync(self) -> None:
        """Hand the store the entries again when the book has changed (once per change)."""
        with self._lock:
            index = self.book.index()
            if index is not self._seen:
                entries = build_entries(self.book, self.problems)
                self.store.sync(entries, fingerprint(entries))
                self._seen = index

    def search(self, query: str) -> SearchResults:
        query = query.strip()
        if not query:
            raise QueryError("Type a word or two to search the book and the problems.")
        if len(query) > MAX_QUERY_CHARS:
            raise QueryError(
                f"That query is {len(query)} characters long; a search takes at most "
                f"{MAX_QUERY_CHARS}."
            )
        terms = terms_of(query)
        if not terms:
            return SearchResults(
                query,
                terms,
                message="That query has no words to search for: try a term "
                "from the book, such as “shared memory” or “roofline”.",
            )
        self._sync()
        every = True
        rows = self.store.query(terms, every=True)
        if not rows and len(terms) > 1:
            every = False
            rows = self.store.query(terms, every=False)
        # Stable: within a tier the engine's order stands.
        rows.sort(key=_tier, reverse=True)
        hits = [_hit(row) for row in rows]
        sections = [h for h in hits if h.kind == "section"][:SECTION_LIMIT]
        problems = [h for h in hits if h.kind == "problem"][:PROBLEM_LIMIT]
        message = None
        if not hits:
            message = f"Nothing in the book or the problems matches “{query}”."
        elif not every:
            message = "No entry has every word; these have some of them."
        return SearchResults(query, terms, sections, problems, every, message)
