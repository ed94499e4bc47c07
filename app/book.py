"""The book: chapters from book/*.md, ordered by part and number, rendered once per file
version and kept in memory (a chapter page must not re-render Markdown per request)."""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kplay.app import benchrefs
from kplay.app.bookmd import BookError, CellSpec, render
from kplay.kernels.problem import ProblemSpec
from kplay.resources import data_dir

__all__ = ["Book", "BookError", "CellSpec", "Chapter", "Part"]


@dataclass(frozen=True)
class Chapter:
    slug: str
    title: str
    part: int
    part_title: str
    number: str
    summary: str
    path: Path
    segments: tuple[str | CellSpec, ...]
    cells: tuple[CellSpec, ...]

    @property
    def sort_key(self) -> tuple[int, tuple[int, ...], str]:
        return (self.part, tuple(int(n) for n in re.findall(r"\d+", self.number)), self.path.name)

    @property
    def label(self) -> str:
        return f"{self.number}. {self.title}" if self.number else self.title


@dataclass(frozen=True)
class Part:
    number: int
    title: str
    chapters: list[Chapter] = field(default_factory=list)


@dataclass(frozen=True)
class _Index:
    signature: tuple[tuple[str, int], ...]
    chapters: tuple[Chapter, ...]
    by_slug: dict[str, Chapter]
    cells: dict[str, CellSpec]


def load_chapter(
    path: Path, problems: Mapping[str, ProblemSpec], results_dir: Path | None = None
) -> Chapter:
    text = path.read_text(encoding="utf-8")
    if results_dir is not None:
        text = benchrefs.fill(text, results_dir)
    default_slug = re.sub(r"^\d+[-_]", "", path.stem)
    rendered = render(text, path, problems, default_slug)
    front = rendered.front
    if not front:
        raise BookError(path, 1, "missing front matter (--- part/title/slug ... ---)")
    for key in ("part", "title"):
        if not front.get(key):
            raise BookError(path, 1, f"front matter: missing '{key}'")
    try:
        part = int(front["part"])
    except ValueError:
        raise BookError(
            path, 1, f"front matter: part must be a whole number, got {front['part']!r}"
        ) from None
    return Chapter(
        slug=front.get("slug") or default_slug,
        title=front["title"],
        part=part,
        part_title=front.get("part_title", ""),
        number=front.get("number", ""),
        summary=front.get("summary", ""),
        path=path,
        segments=rendered.segments,
        cells=rendered.cells,
    )


class Book:
    """All chapters of one book folder. Safe to share between request threads."""

    def __init__(
        self,
        book_dir: Path,
        problems: Mapping[str, ProblemSpec],
        results_dir: Path | None = None,
    ) -> None:
        self.book_dir = Path(book_dir)
        self.problems = problems
        self._lock = threading.Lock()
        self._rendered: dict[Path, tuple[int, Chapter]] = {}
        self._index: _Index | None = None
        # Measured figures the chapters quote: the installed results unless told otherwise.
        self.results_dir = Path(results_dir) if results_dir else data_dir("results")

    def _results_mtime(self) -> int:
        if not self.results_dir.is_dir():
            return 0
        return max((p.stat().st_mtime_ns for p in self.results_dir.glob("*.json")), default=0)

    def _signature(self) -> tuple[tuple[str, int], ...]:
        paths = sorted(self.book_dir.glob("*.md")) if self.book_dir.is_dir() else []
        results = self._results_mtime()
        return tuple((str(p), max(p.stat().st_mtime_ns, results)) for p in paths)

    def _chapter(self, path: Path, mtime: int) -> Chapter:
        cached = self._rendered.get(path)
        if cached and cached[0] == mtime:
            return cached[1]
        chapter = load_chapter(path, self.problems, self.results_dir)
        self._rendered[path] = (mtime, chapter)
        return chapter

    def index(self) -> _Index:
        """Re-reads only the files whose modification time changed."""
        signature = self._signature()
        with self._lock:
            if self._index is not None and self._index.signature == signature:
                return self._index
            chapters = sorted(
                (self._chapter(Path(p), m) for p, m in signature), key=lambda c: c.sort_key
            )
            self._index = _build_index(signature, chapters)
            return self._index

    def chapters(self) -> list[Chapter]:
        return list(self.index().chapters)

    def chapter(self, slug: str) -> Chapter:
        found = self.index().by_slug.get(slug)
        if found is None:
            raise KeyError(f"no chapter {slug!r}")
        return found

    def cell(self, cell_id: str) -> CellSpec:
        found = self.index().cells.get(cell_id)
        if found is None:
            raise KeyError(f"no kernel cell {cell_id!r} in the book")
        return found

    def neighbours(self, slug: str) -> tuple[Chapter | None, Chapter | None]:
        chapters = self.index().chapters
        at = [c.slug for c in chapters].index(slug)
        before = chapters[at - 1] if at > 0 else None
        after = chapters[at + 1] if at + 1 < len(chapters) else None
        return before, after

    def parts(self) -> list[Part]:
        parts: dict[int, Part] = {}
        for chapter in self.index().chapters:
            part = parts.get(chapter.part)
            if part is None:
                title = chapter.part_title or f"Part {chapter.part}"
                part = parts[chapter.part] = Part(chapter.part, title)
            part.chapters.append(chapter)
        return [parts[k] for k in sorted(parts)]


def _build_index(signature: tuple[tuple[str, int], ...], chapters: list[Chapter]) -> _Index:
    by_slug: dict[str, Chapter] = {}
    cells: dict[str, CellSpec] = {}
    for chapter in chapters:
        if chapter.slug in by_slug:
            other = by_slug[chapter.slug].path.name
            raise BookError(chapter.path, 1, f"slug {chapter.slug!r} already used by {other}")
        by_slug[chapter.slug] = chapter
        for cell in chapter.cells:
            if cell.id in cells:
                first = cells[cell.id]
                raise BookError(
                    cell.path,
                    cell.line,
                    f"duplicate kernel-cell id {cell.id!r} (first in {first.path.name}:"
                    f"{first.line})",
                )
            cells[cell.id] = cell
    return _Index(signature, tuple(chapters), by_slug, cells)
