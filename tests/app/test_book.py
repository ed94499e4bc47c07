"""The book: every chapter renders, cells are validated, errors name the file and line;
parts are folders titled once, front matter is YAML checked field by field."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from kplay.app.book import Book, BookError
from kplay.app.bookmd import CellSpec
from kplay.config import Settings
from kplay.kernels.catalog import load_catalog

CHAPTER = """---
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


def part(root: Path, number: int = 2, title: str = "Second part") -> Path:
    """A part folder `p<number>` of the book at `root`, titled in its part.toml."""
    folder = root / f"p{number}"
    folder.mkdir(exist_ok=True)
    (folder / "part.toml").write_text(f'title = "{title}"\n')
    return folder


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
    write(part(tmp_path), "03-test.md", CHAPTER)
    chapter = Book(tmp_path, load_catalog()).chapter("test-chapter")
    kinds = [type(s).__name__ for s in chapter.segments]
    assert kinds == ["str", "CellSpec", "str"]
    cell = chapter.segments[1]
    assert isinstance(cell, CellSpec)
    assert cell.backends == ("numba-cpu", "cuda") and cell.title == "A test cell"
    assert cell.chapter == "test-chapter" and cell.line == 20
    prose = chapter.segments[0]
    assert isinstance(prose, str)
    assert "<table>" in prose and "<em>prose</em>" in prose
    assert 'class="code-block"' in prose and "<span" in prose  # Pygments ran
    assert chapter.part == 2 and chapter.part_title == "Second part" and chapter.number == "3"
    assert chapter.url == "/book/p2/test-chapter"


def test_backends_default_to_what_the_problem_offers(tmp_path: Path) -> None:
    text = CHAPTER.replace("backends: numba-cpu, cuda   # the tabs offered\n", "")
    write(part(tmp_path), "03-test.md", text)
    cell = Book(tmp_path, load_catalog()).cell("t-cell")
    assert set(cell.backends) == set(load_catalog()["vector_add"].backends)


@pytest.mark.parametrize(
    ("old", "new", "message", "line"),
    [
        ("problem: vector_add", "problem: no_such", "unknown problem 'no_such'", 22),
        ("backend: numba-cpu\n", "backend: fortran\n", "does not offer backend 'fortran'", 23),
        ("numba-cpu, cuda", "numba-cpu, opencl", "does not offer backend 'opencl'", 24),
        ("id: t-cell\n", "", "missing 'id'", 20),
        ("title: A test cell", "colour: red", "unknown key(s) ['colour']", 20),
        ("id: t-cell", "id: bad id!", "use letters, digits", 21),
        ("backend: numba-cpu\n", "backend: triton\n", "backend 'triton' not in backends", 23),
    ],
)
def test_cell_errors_name_file_and_line(
    tmp_path: Path, old: str, new: str, message: str, line: int
) -> None:
    path = write(part(tmp_path), "03-test.md", CHAPTER.replace(old, new, 1))
    with pytest.raises(BookError) as err:
        Book(tmp_path, load_catalog()).chapters()
    assert message in str(err.value)
    assert f"{path}:{line}" in str(err.value)


def test_duplicate_cell_ids_are_refused_within_and_across_chapters(tmp_path: Path) -> None:
    cell = CHAPTER[CHAPTER.index("```kernel-cell") :]
    write(part(tmp_path), "03-test.md", CHAPTER + "\n" + cell)
    with pytest.raises(BookError, match="duplicate kernel-cell id 't-cell'"):
        Book(tmp_path, load_catalog()).chapters()
    other = tmp_path / "other"
    other.mkdir()
    write(part(other, 1, "First part"), "03-test.md", CHAPTER)
    write(part(other), "04-more.md", CHAPTER.replace("slug: test-chapter", "slug: more"))
    with pytest.raises(BookError) as err:
        Book(other, load_catalog()).chapters()
    assert "04-more.md:20" in str(err.value) and "first in p1/03-test.md:20" in str(err.value)


@pytest.mark.parametrize(
    ("front", "message", "line"),
    [
        ("title: T\npart: one\n", "field part: Input should be a valid integer", 3),
        ("title: T\ntitel: T\n", "unknown field 'titel'; use title, slug", 3),
        ("slug: s\n", "field title: Field required", 1),
        ("title: T\nslug: Not A Slug\n", "field slug: String should match pattern", 3),
        ("title: T\nsummary: a: b\n", "front matter is not valid YAML", 3),
        ("title: T\nnumber: 2\ntitle: U\n", "'title' given twice (line 2)", 4),
        ("- title\n- slug\n", "front matter must be 'key: value' lines", 1),
    ],
)
def test_front_matter_errors_name_the_field_and_line(
    tmp_path: Path, front: str, message: str, line: int
) -> None:
    path = write(part(tmp_path), "01-a.md", f"---\n{front}---\ntext\n")
    with pytest.raises(BookError) as err:
        Book(tmp_path, load_catalog()).chapters()
    assert message in str(err.value)
    assert str(err.value).startswith(f"{path}:{line}: ")


def test_a_chapter_without_front_matter_is_refused(tmp_path: Path) -> None:
    path = write(part(tmp_path), "01-a.md", "# No front matter\n")
    with pytest.raises(BookError, match="missing front matter") as err:
        Book(tmp_path, load_catalog()).chapters()
    assert err.value.path == path


def test_front_matter_is_yaml(tmp_path: Path) -> None:
    front = (
        "---\n"
        'title: "Colons: quoted"\n'
        "number: 7   # shown as text\n"
        "summary: >-\n  folded over\n  two lines\n"
        "---\ntext\n"
    )
    write(part(tmp_path), "01-a.md", front)
    chapter = Book(tmp_path, load_catalog()).chapter("a")
    assert chapter.title == "Colons: quoted" and chapter.number == "7"
    assert chapter.summary == "folded over two lines"


def test_part_titles_are_written_once_in_part_toml(tmp_path: Path) -> None:
    folder = part(tmp_path)
    path = write(folder, "01-a.md", "---\ntitle: A\npart: 2\npart_title: Second part\n---\n")
    assert Book(tmp_path, load_catalog()).parts()[0].title == "Second part"  # agreeing: fine
    path.write_text("---\ntitle: A\npart_title: Another title\n---\n")
    with pytest.raises(BookError) as err:
        Book(tmp_path, load_catalog()).chapters()
    assert str(err.value).startswith(f"{path}:3: ")
    assert "'Another title'" in str(err.value) and str(folder / "part.toml") in str(err.value)
    path.write_text("---\ntitle: A\npart: 3\n---\n")
    with pytest.raises(BookError, match="part 3 but the file is in part 2") as err:
        Book(tmp_path, load_catalog()).chapters()
    assert err.value.path == path


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (None, "missing part.toml"),
        ("", "field title: Field required"),
        ('title = ""', "field title: String should have at least 1 character"),
        ('title = "T"\ncolour = "red"', "field colour: unknown field"),
        ("title = ", "not valid TOML"),
    ],
)
def test_a_part_without_a_title_stops_the_book(tmp_path: Path, toml: str | None, message: str):
    write(part(tmp_path, 1, "First"), "01-a.md", "---\ntitle: A\n---\n")
    folder = tmp_path / "p3"
    folder.mkdir()
    write(folder, "01-b.md", "---\ntitle: B\n---\n")
    if toml is not None:
        write(folder, "part.toml", toml)
    with pytest.raises(BookError, match=message) as err:
        Book(tmp_path, load_catalog()).chapters()
    assert err.value.path == folder / "part.toml"


def test_chapters_live_in_part_folders_only(tmp_path: Path) -> None:
    write(part(tmp_path, 1, "First"), "01-a.md", "---\ntitle: A\n---\n")
    (tmp_path / "__pycache__").mkdir()  # not part of the book
    assert [c.slug for c in Book(tmp_path, load_catalog()).chapters()] == ["a"]
    stray = write(tmp_path, "02-b.md", "---\ntitle: B\n---\n")
    with pytest.raises(BookError, match="belongs in a part folder") as err:
        Book(tmp_path, load_catalog()).chapters()
    assert err.value.path == stray
    stray.unlink()
    for name in ("extras", "p01", "p0"):
        (tmp_path / name).mkdir()
        with pytest.raises(BookError, match="a folder of the book is a part") as err:
            Book(tmp_path, load_catalog()).chapters()
        assert err.value.path == tmp_path / name
        (tmp_path / name).rmdir()


def test_chapters_are_ordered_by_part_then_number(tmp_path: Path) -> None:
    def front(slug: str, number: str = "") -> str:
        line = f"number: {number}\n" if number else ""
        return f"---\n{line}title: {slug}\nslug: {slug}\n---\ntext\n"

    one, two = part(tmp_path, 1, "One"), part(tmp_path, 2, "Two")
    write(one, "02-z.md", front("b"))
    write(two, "01-y.md", front("c"))
    write(one, "x.md", front("d", "10"))
    write(one, "01-w.md", front("a"))
    book = Book(tmp_path, load_catalog())
    assert [c.slug for c in book.chapters()] == ["a", "b", "d", "c"]
    assert [c.number for c in book.chapters()] == ["1", "2", "10", "1"]
    assert [(p.number, p.title) for p in book.parts()] == [(1, "One"), (2, "Two")]
    assert book.neighbours("b") == (book.chapter("a"), book.chapter("d"))
    assert book.neighbours("a")[0] is None and book.neighbours("c")[1] is None
    assert book.chapter("c").url == "/book/p2/c"


def test_rendering_is_cached_until_the_file_changes(tmp_path: Path) -> None:
    folder = part(tmp_path)
    path = write(folder, "03-test.md", CHAPTER)
    book = Book(tmp_path, load_catalog())
    first = book.chapter("test-chapter")
    assert book.chapter("test-chapter") is first
    path.write_text(CHAPTER.replace("After the cell.", "Changed text."))
    later = time.time() + 5
    os.utime(path, (later, later))
    changed = book.chapter("test-chapter")
    assert changed is not first and "Changed text." in str(changed.segments[-1])
    # A new part title reaches the chapter without touching its file.
    (folder / "part.toml").write_text('title = "Renamed part"\n')
    os.utime(folder / "part.toml", (later + 5, later + 5))
    assert book.chapter("test-chapter").part_title == "Renamed part"
    assert book.parts()[0].title == "Renamed part"


def test_a_cell_inside_a_block_is_refused(tmp_path: Path) -> None:
    cell = CHAPTER[CHAPTER.index("```kernel-cell") : CHAPTER.index("After the cell.")]
    indented = "".join(f"    {line}\n" for line in cell.strip().splitlines())
    text = CHAPTER.replace(cell, f'!!! note "Try it"\n{indented}\n')
    path = write(part(tmp_path), "03-test.md", text)
    with pytest.raises(BookError, match="must stand on its own") as err:
        Book(tmp_path, load_catalog()).chapters()
    assert f"{path}:21" in str(err.value)


# Every chapter's slug and cell ids as they were before the chapters moved into part
# folders (book/01-first-kernel-cpu.md, book/p1-03-roofline.md, ...): readers' run
# histories hang on the ids and runs record the slug, so a move must keep both.
IDS_BEFORE_THE_MOVE = {
    "first-kernel-cpu": ["ch01-vadd-cpu", "ch01-saxpy-cpu"],
    "first-gpu-kernel": ["ch02-vadd-gpu", "ch02-saxpy-gpu"],
    "roofline": ["ch03-triad-exercise", "ch03-fma-exercise"],
    "ilp-simd": ["ch04-simd-sum-exercise"],
    "cpu-threads": ["ch05-parallel-sum-exercise"],
    "transpose": ["ch06-transpose", "ch06-transpose-smem-exercise"],
    "reductions": ["ch07-sum", "ch07-warp-shuffle-exercise"],
    "gemm-naive": ["p2-naive-sgemm"],
    "gemm-coalescing": ["p2-coalesced-sgemm", "p2-ex-coalesce"],
    "gemm-smem-tiling": ["p2-smem-tiling-exercise"],
    "gemm-blocktiling": ["p2-blocktiling-sgemm", "p2-ex-blocktile-2d"],
    "gemm-vectorized": ["p2-vectorized-sgemm", "p2-ex-vectorized"],
    "gemm-warptiling": ["p2-warptile-sgemm", "p2-ex-warptile"],
    "gemm-wmma": ["p2-wmma-exercise"],
    "gemm-ladder": ["p2-ladder-sgemm"],
}


def test_moving_the_chapters_kept_every_slug_and_cell_id() -> None:
    book = Book(Settings().book_dir, load_catalog())
    now = {c.slug: [cell.id for cell in c.cells] for c in book.chapters()}
    for slug, ids in IDS_BEFORE_THE_MOVE.items():
        # Every id is still there, in its order; cells added since may stand between them.
        kept = [cell for cell in now.get(slug, []) if cell in ids]
        assert kept == ids, f"chapter {slug}: cell ids {now.get(slug)} lack some of {ids}"


def test_the_book_has_one_naming_scheme() -> None:
    root = Settings().book_dir
    assert not list(root.glob("*.md")), "chapters live in part folders"
    for chapter in Book(root, load_catalog()).chapters():
        rel = chapter.path.relative_to(root).as_posix()
        assert re.fullmatch(r"p[1-9][0-9]*/[0-9]{2}-[a-z0-9-]+\.md", rel), rel
        assert rel.startswith(f"p{chapter.part}/")
        assert chapter.path.stem.startswith(f"{int(chapter.number):02d}-"), rel
