"""The book: every chapter renders, cells are validated, errors name the file and line."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kplay.app.book import Book, BookError
from kplay.app.bookmd import CellSpec
from kplay.config import Settings
from kplay.kernels.catalog import load_catalog

CHAPTER = """---
part: 2
part_title: Second part
number: 3
title: Test chapter
slug: test-chapter
summary: a chapter for tests
---

# Heading

Some *prose* with a table:

| a | b |
|---|---|
| 1 | 2 |

```python
def f(x):
    return x + 1
```

```kernel-cell
id: t-cell
problem: vector_add
backend: numba-cpu
backends: numba-cpu, cuda   # the tabs offered
title: A test cell
```

After the cell.
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_every_chapter_in_the_book_renders() -> None:
    catalog = load_catalog()
    book = Book(Settings().book_dir, catalog)
    chapters = book.chapters()
    assert len(chapters) >= 2
    for chapter in chapters:
        assert chapter.title and chapter.slug and chapter.segments
        for cell in chapter.cells:
            problem = catalog[cell.problem]
            assert cell.backend in cell.backends
            assert set(cell.backends) <= set(problem.backends)
            for backend in cell.backends:
                assert problem.starter(backend).strip()


def test_cpu_and_gpu_sample_chapters_are_present() -> None:
    book = Book(Settings().book_dir, load_catalog())
    backends = {b for ch in book.chapters() for cell in ch.cells for b in cell.backends}
    assert "numba-cpu" in backends and {"cuda", "numba-cuda", "triton"} <= backends


def test_chapter_segments_interleave_prose_and_cells(tmp_path: Path) -> None:
    write(tmp_path, "03-test.md", CHAPTER)
    chapter = Book(tmp_path, load_catalog()).chapter("test-chapter")
    kinds = [type(s).__name__ for s in chapter.segments]
    assert kinds == ["str", "CellSpec", "str"]
    cell = chapter.segments[1]
    assert isinstance(cell, CellSpec)
    assert cell.backends == ("numba-cpu", "cuda") and cell.title == "A test cell"
    assert cell.chapter == "test-chapter" and cell.line == 23
    prose = chapter.segments[0]
    assert isinstance(prose, str)
    assert "<table>" in prose and "<em>prose</em>" in prose
    assert 'class="code-block"' in prose and "<span" in prose  # Pygments ran
    assert chapter.part == 2 and chapter.part_title == "Second part" and chapter.number == "3"


def test_backends_default_to_what_the_problem_offers(tmp_path: Path) -> None:
    text = CHAPTER.replace("backends: numba-cpu, cuda   # the tabs offered\n", "")
    write(tmp_path, "03-test.md", text)
    cell = Book(tmp_path, load_catalog()).cell("t-cell")
    assert set(cell.backends) == set(load_catalog()["vector_add"].backends)


@pytest.mark.parametrize(
    ("old", "new", "message", "line"),
    [
        ("problem: vector_add", "problem: no_such", "unknown problem 'no_such'", 25),
        ("backend: numba-cpu\n", "backend: fortran\n", "does not offer backend 'fortran'", 26),
        ("numba-cpu, cuda", "numba-cpu, opencl", "does not offer backend 'opencl'", 27),
        ("id: t-cell\n", "", "missing 'id'", 23),
        ("title: A test cell", "colour: red", "unknown key(s) ['colour']", 23),
        ("id: t-cell", "id: bad id!", "use letters, digits", 24),
        ("backend: numba-cpu\n", "backend: triton\n", "backend 'triton' not in backends", 26),
    ],
)
def test_cell_errors_name_file_and_line(
    tmp_path: Path, old: str, new: str, message: str, line: int
) -> None:
    path = write(tmp_path, "03-test.md", CHAPTER.replace(old, new, 1))
    with pytest.raises(BookError) as err:
        Book(tmp_path, load_catalog()).chapters()
    assert message in str(err.value)
    assert f"{path}:{line}" in str(err.value)


def test_duplicate_cell_ids_are_refused_within_and_across_chapters(tmp_path: Path) -> None:
    cell = CHAPTER[CHAPTER.index("```kernel-cell") :]
    write(tmp_path, "03-test.md", CHAPTER + "\n" + cell)
    with pytest.raises(BookError, match="duplicate kernel-cell id 't-cell'"):
        Book(tmp_path, load_catalog()).chapters()
    other = tmp_path / "other"
    other.mkdir()
    write(other, "03-test.md", CHAPTER)
    write(other, "04-more.md", CHAPTER.replace("slug: test-chapter", "slug: more"))
    with pytest.raises(BookError) as err:
        Book(other, load_catalog()).chapters()
    assert "04-more.md:23" in str(err.value) and "first in 03-test.md:23" in str(err.value)


def test_front_matter_errors(tmp_path: Path) -> None:
    write(tmp_path, "a.md", "# No front matter\n")
    with pytest.raises(BookError, match="missing front matter"):
        Book(tmp_path, load_catalog()).chapters()
    write(tmp_path, "a.md", "---\npart: one\ntitle: T\n---\n")
    with pytest.raises(BookError, match="part must be a whole number"):
        Book(tmp_path, load_catalog()).chapters()
    write(tmp_path, "a.md", "---\npart: 1\ntitel: T\n---\n")
    with pytest.raises(BookError, match=r"unknown key\(s\) \['titel'\]"):
        Book(tmp_path, load_catalog()).chapters()


def test_chapters_are_ordered_by_part_then_number(tmp_path: Path) -> None:
    def front(part: int, number: str, slug: str) -> str:
        return f"---\npart: {part}\nnumber: {number}\ntitle: {slug}\nslug: {slug}\n---\ntext\n"

    write(tmp_path, "z.md", front(1, "2", "b"))
    write(tmp_path, "y.md", front(2, "1", "c"))
    write(tmp_path, "x.md", front(1, "10", "d"))
    write(tmp_path, "w.md", front(1, "1", "a"))
    book = Book(tmp_path, load_catalog())
    assert [c.slug for c in book.chapters()] == ["a", "b", "d", "c"]
    assert [(p.number, p.title) for p in book.parts()] == [(1, "Part 1"), (2, "Part 2")]
    assert book.neighbours("b") == (book.chapter("a"), book.chapter("d"))
    assert book.neighbours("a")[0] is None and book.neighbours("c")[1] is None


def test_rendering_is_cached_until_the_file_changes(tmp_path: Path) -> None:
    path = write(tmp_path, "03-test.md", CHAPTER)
    book = Book(tmp_path, load_catalog())
    first = book.chapter("test-chapter")
    assert book.chapter("test-chapter") is first
    path.write_text(CHAPTER.replace("After the cell.", "Changed text."))
    later = time.time() + 5
    os.utime(path, (later, later))
    changed = book.chapter("test-chapter")
    assert changed is not first and "Changed text." in str(changed.segments[-1])


def test_a_cell_inside_a_block_is_refused(tmp_path: Path) -> None:
    cell = CHAPTER[CHAPTER.index("```kernel-cell") : CHAPTER.index("After the cell.")]
    indented = "".join(f"    {line}\n" for line in cell.strip().splitlines())
    text = CHAPTER.replace(cell, f'!!! note "Try it"\n{indented}\n')
    path = write(tmp_path, "03-test.md", text)
    with pytest.raises(BookError, match="must stand on its own") as err:
        Book(tmp_path, load_catalog()).chapters()
    assert f"{path}:24" in str(err.value)
