"""The book: one folder per part (`book/p1/`, `book/p2/`, ...), each with its title in
`part.toml` and its chapters as Markdown files, ordered by part and number, rendered once per
file version and kept in memory (a chapter page must not re-render Markdown per request).

A chapter's address is `/book/p<part>/<slug>`; its slug and its cells' ids are written in
the file, so renaming or moving the file keeps both (and with them readers' run histories).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kplay.app import benchrefs
from kplay.app.bookfront import PART_FILE, BookError, load_part, part_number
from kplay.app.bookmd import CellSpec, render
from kplay.app.problemcell import is_problem_cell_id, problem_cell
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

    @property
    def part_dir(self) -> str:
        return f"p{self.part}"

    @property
    def url(self) -> str:
        return f"/book/{self.part_dir}/{self.slug}"


@dataclass(frozen=True)
class Part:
    number: int
    title: str
    chapters: list[Chapter] = field(default_factory=list)


@dataclass(frozen=True)
class _Index:
    signature: tuple[tuple[str, int], ...]
    part_titles: dict[int, str]
    chapters: tuple[Chapter, ...]
    by_slug: dict[str, Chapter]
    cells: dict[str, CellSpec]


def load_chapter(
    path: Path,
    problems: Mapping[str, ProblemSpec],
    part: int,
    part_title: str,
    results_dir: Path | None = None,
) -> Chapter:
    """One chapter of part `part` (whose `part.toml` gives `part_title`)."""
    text = path.read_text(encoding="utf-8")
    if results_dir is not None:
        text = benchrefs.fill(text, results_dir)
    default_slug = re.sub(r"^\d+[-_]", "", path.stem)
    rendered = render(text, path, problems, default_slug)
    front = rendered.front
    if front is None:
        raise BookError(path, 1, "missing front matter (--- title/slug/summary ... ---)")
    where = path.parent / PART_FILE
    if front.part is not None and front.part != part:
        raise BookError(
            path,
            front.line("part"),
            f"front matter: part {front.part} but the file is in part {part}",
        )
    if front.part_title is not None and front.part_title != part_title:
        raise BookError(
            path,
            front.line("part_title"),
            f"front matter: part_title {front.part_title!r} differs from {part_title!r} in "
            f"{where}; the part's title is written there only",
        )
    leading = re.match(r"\d+", path.stem)
    return Chapter(
        slug=front.slug or default_slug,
        title=front.title,
        part=part,
        part_title=part_title,
        number=front.number or (str(int(leading.group())) if leading else ""),
        summary=front.summary,
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

    def _files(self) -> list[Path]:
        """Each part's `part.toml`, then its chapters. A chapter outside a part folder, or a
        folder that is not a part, is an error rather than something silently skipped."""
        if not self.book_dir.is_dir():
            return []
        found: list[Path] = []
        for entry in sorted(self.book_dir.iterdir()):
            if entry.name.startswith(("_", ".")):
                continue
            if entry.is_dir():
                if part_number(entry) is None:
                    raise BookError(entry, None, "a folder of the book is a part: p1, p2, ...")
                found.append(entry / PART_FILE)
                found.extend(sorted(entry.glob("*.md")))
            elif entry.suffix == ".md":
                raise BookError(entry, None, "a chapter belongs in a part folder (p1/, p2/, ...)")
        return found

    def _signature(self) -> tuple[tuple[str, int], ...]:
        results = self._results_mtime()
        out = []
        for path in self._files():
            try:
                mtime = path.stat().st_mtime_ns
            except FileNotFoundError:
                mtime = -1  # a part without part.toml: load_part says so
            out.append((str(path), max(mtime, results) if path.suffix == ".md" else mtime))
        return tuple(out)

    def _chapter(self, path: Path, mtime: int, part: int, part_title: str) -> Chapter:
        cached = self._rendered.get(path)
        if cached and cached[0] == mtime and cached[1].part_title == part_title:
            return cached[1]
        chapter = load_chapter(path, self.problems, part, part_title, self.results_dir)
        self._rendered[path] = (mtime, chapter)
        return chapter

    def index(self) -> _Index:
        """Re-reads only the files whose modification time changed."""
        signature = self._signature()
        with self._lock:
            if self._index is not None and self._index.signature == signature:
                return self._index
            titles: dict[int, str] = {}
            chapters: list[Chapter] = []
            for name, mtime in signature:
                path = Path(name)
                part = part_number(path.parent)
                assert part is not None
                if path.name == PART_FILE:
                    titles[part] = load_part(path.parent).title
                else:
                    chapters.append(self._chapter(path, mtime, part, titles[part]))
            chapters.sort(key=lambda c: c.sort_key)
            self._index = _build_index(signature, titles, chapters)
            return self._index

    def chapters(self) -> list[Chapter]:
        return list(self.index().chapters)

    def chapter(self, slug: str) -> Chapter:
        found = self.index().by_slug.get(slug)
        if found is None:
            raise KeyError(f"no chapter {slug!r}")
        return found

    def cell(self, cell_id: str) -> CellSpec:
        """A chapter's cell, or the catalog's own cell of a problem (app.problemcell)."""
        found = self.index().cells.get(cell_id) or problem_cell(cell_id, self.problems)
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
        """The parts that have chapters, in order, each titled by its `part.toml`."""
        index = self.index()
        parts: dict[int, Part] = {}
        for chapter in index.chapters:
            part = parts.get(chapter.part)
            if part is None:
                part = parts[chapter.part] = Part(chapter.part, index.part_titles[chapter.part])
            part.chapters.append(chapter)
        return [parts[k] for k in sorted(parts)]


def _build_index(
    signature: tuple[tuple[str, int], ...], titles: dict[int, str], chapters: list[Chapter]
) -> _Index:
    by_slug: dict[str, Chapter] = {}
    cells: dict[str, CellSpec] = {}
    for chapter in chapters:
        if chapter.slug in by_slug:
            other = by_slug[chapter.slug].path
            raise BookError(chapter.path, 1, f"slug {chapter.slug!r} already used by {other}")
        by_slug[chapter.slug] = chapter
        for cell in chapter.cells:
            if is_problem_cell_id(cell.id):
                raise BookError(
                    cell.path,
                    cell.line,
                    f"kernel-cell id {cell.id!r}: ids of the form "
                    "'problem-<slug>' belong to the problem catalog's own cells",
                )
            if cell.id in cells:
                first = cells[cell.id]
                where = f"{first.path.parent.name}/{first.path.name}:{first.line}"
                raise BookError(
                    cell.path, cell.line, f"duplicate kernel-cell id {cell.id!r} (first in {where})"
                )
            cells[cell.id] = cell
    return _Index(signature, titles, tuple(chapters), by_slug, cells)
