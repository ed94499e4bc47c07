"""What the built book adds to each chapter's page: numbered figures and tables, and an index
of terms.

A figure in a chapter is an image alone in its paragraph, whose alternative text is its
caption; in a built copy it becomes a `<figure>` numbered part.chapter.n ("Figure 2.3.1")
with that caption beneath. Each table of the prose gets a numbered caption the same way.
The index's terms are listed in `book/terms.toml`; the first use of each in a chapter's
prose (outside code, headings, links and captions) gets an anchor, and the index lists, per
term, the chapters that use it, linked to that place. The PDF prints the page number of
each entry as well (print CSS, `target-counter`).
"""

from __future__ import annotations

import html
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kplay.app.book import Chapter
from kplay.app.render import roman

TERMS_FILE = "terms.toml"
_FIGURE = re.compile(r'<p><img src="([^"]+)" alt="([^"]*)" ?/?></p>')
_TABLE = re.compile(r"<table>")
_TOKENS = re.compile(r"(<[^>]+>)")
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9]*)")
# Text inside these is never an index entry.
SKIP = frozenset({"code", "pre", "a", "h1", "h2", "h3", "h4", "h5", "h6", "svg", "script",
                  "style", "title", "figcaption", "summary", "button", "kbd"})  # fmt: skip


@dataclass(frozen=True)
class Term:
    name: str
    forms: tuple[str, ...]

    @property
    def key(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")

    @property
    def pattern(self) -> re.Pattern[str]:
        alts = "|".join(re.escape(f) for f in sorted(self.forms, key=len, reverse=True))
        return re.compile(rf"(?<![\w.-])(?:{alts})(?![\w-])", re.IGNORECASE)


def load_terms(book_dir: Path) -> list[Term]:
    """The index's terms; none when the book has no terms file. A malformed entry raises."""
    path = Path(book_dir) / TERMS_FILE
    if not path.is_file():
        return []
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    terms = []
    for i, entry in enumerate(data.get("term", [])):
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"{path}: term {i + 1} has no name")
        forms = entry.get("forms", [name])
        if not isinstance(forms, list) or not all(isinstance(f, str) and f for f in forms):
            raise ValueError(f"{path}: term {name!r}: forms must be a list of words")
        terms.append(Term(name, tuple(forms)))
    return sorted(terms, key=lambda t: t.name.lower())


def chapter_code(chapter: Chapter) -> str:
    """The chapter's number across the book: part and chapter, "2.3"."""
    return f"{chapter.part}.{chapter.number}" if chapter.number else str(chapter.part)


def chapter_label(chapter: Chapter) -> str:
    return f"{roman(chapter.part)}.{chapter.number}" if chapter.number else roman(chapter.part)


@dataclass
class Entry:
    term: Term
    places: list[tuple[Chapter, str]] = field(default_factory=list)  # (chapter, anchor id)


def number_tables(text: str, chapter: Chapter, start: int = 0) -> tuple[str, int]:
    """`text` with each table given a numbered caption ("Table 2.3.1"), counting on from
    `start`; and the count reached."""
    count = start

    def one(m: re.Match[str]) -> str:
        nonlocal count
        count += 1
        number = f"{chapter_code(chapter)}.{count}"
        return f'{m.group(0)}<caption class="table-no" id="table-{number}">Table {number}</caption>'

    return _TABLE.sub(one, text), count


def number_figures(text: str, chapter: Chapter, start: int = 0) -> tuple[str, int]:
    """`text` with each lone image made a numbered figure, counting on from `start`; and the
    count reached."""
    count = start

    def one(m: re.Match[str]) -> str:
        nonlocal count
        count += 1
        number = f"{chapter_code(chapter)}.{count}"
        return (
            f'<figure class="book-figure" id="fig-{number}">'
            f'<img src="{m.group(1)}" alt="{m.group(2)}" />'
            f'<figcaption><span class="fig-no">Figure {number}</span> {m.group(2)}</figcaption>'
            "</figure>"
        )

    return _FIGURE.sub(one, text), count


class Index:
    """Collects the terms' places over the chapters of one build."""

    def __init__(self, terms: list[Term]) -> None:
        self.entries = {t.key: Entry(t) for t in terms}
        self._done: set[tuple[str, str]] = set()  # (term, chapter): its first use is marked

    def mark(self, text: str, chapter: Chapter) -> str:
        """`text` (a chapter's HTML) with an anchor before each term's first use in prose."""
        ns = f"{chapter.part_dir}-{chapter.slug}"
        todo = {k: e for k, e in self.entries.items() if (k, ns) not in self._done}
        out: list[str] = []
        depth = 0
        for token in _TOKENS.split(text):
            if token.startswith("<"):
                tag = _TAG.match(token)
                if tag and tag.group(2).lower() in SKIP and not token.endswith("/>"):
                    depth += -1 if tag.group(1) else 1
                out.append(token)
                continue
            if depth > 0 or not todo or not token.strip():
                out.append(token)
                continue
            out.append(self._mark_text(token, chapter, todo))
        return "".join(out)

    def _mark_text(self, token: str, chapter: Chapter, todo: dict[str, Entry]) -> str:
        hits: list[tuple[int, str]] = []
        for key, entry in list(todo.items()):
            found = entry.term.pattern.search(token)
            if found:
                anchor = f"idx-{key}-{chapter.part_dir}-{chapter.slug}"
                hits.append((found.start(), anchor))
                entry.places.append((chapter, anchor))
                self._done.add((key, f"{chapter.part_dir}-{chapter.slug}"))
                del todo[key]
        for start, anchor in sorted(hits, reverse=True):
            token = f'{token[:start]}<span class="index-mark" id="{anchor}"></span>{token[start:]}'
        return token

    def used(self) -> list[Entry]:
        return [e for e in self.entries.values() if e.places]

    def render(self, href: Callable[[Chapter, str], str], page_numbers: bool = False) -> str:
        """The index as HTML: a term per line, each chapter that uses it linked with `href`."""
        rows = []
        for entry in sorted(self.used(), key=lambda e: e.term.name.lower()):
            links = ", ".join(
                f'<a class="index-ref{" with-page" if page_numbers else ""}" '
                f'href="{html.escape(href(ch, anchor))}">{chapter_label(ch)}</a>'
                for ch, anchor in entry.places
            )
            rows.append(f"<dt>{html.escape(entry.term.name)}</dt><dd>{links}</dd>")
        return (
            '<section class="book-index" id="index-of-terms"><h1>Index</h1>'
            "<p>Each entry names the chapters that use the term (part.chapter), linked to the "
            f'first use in each.</p><dl class="index-list">{"".join(rows)}</dl></section>'
        )
