"""The source view (/source/{path}): the package's files, highlighted, numbered and anchored;
everything outside its allow-list refused with a 404 page that says why; and the book's
prose linking every file of the package it names."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from kplay.app import format as fmt
from kplay.app.book import Book
from kplay.app.bookmd import markdown, render
from kplay.app.services.sourceview import (
    CODE_SUFFIXES,
    MAX_BYTES,
    Root,
    SourceTree,
    installed_tree,
)
from kplay.config import Settings
from kplay.kernels.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[2]
# Paths the book names that the view does not show, each with the reason.
NOT_SERVED = {
    "bench/tune_gpu.py": "a benchmark script of the repository, not part of the installed package",
    "bench/RESULTS.md": "the repository's benchmark notes, not part of the installed package",
    "docs/timing.md": "the repository's documentation, not part of the installed package",
    "docs/backends.md": "the repository's documentation, not part of the installed package",
    "bench/results/triton_tiled_4096_h100.json": "a recorded run of the repository's "
    "benchmarks, not part of the installed package",
    "tests/kernels/test_solutions.py": "the repository's tests, not part of the installed package",
    "bench/cutlass_gemm.py": "a benchmark script of the repository, not installed",
    "bench/fp8_error.py": "a benchmark script of the repository, not installed",
    "bench/cutlass_builder.py": "a benchmark script of the repository, not installed",
    "tests/kernels/test_gemm_fp8.py": "the repository's tests, not part of the installed package",
    "bench/fp8_sweep.py": "a benchmark script of the repository, not installed",
    "bench/fp8_ttgir.py": "a benchmark script of the repository, not installed",
    "bench/cute_dsl_gemm.py": "a benchmark script of the repository, not installed",
    "bench/cute_dsl_gemm_kernel.py": "a benchmark kernel of the repository, not installed",
    "bench/results/problem_runs_gemm_fp8_h100_7799f8e.json": "a recorded run with its compiler "
    "listings, over the view's 256 KiB",
    "bench/results/gemm_stalls_h200_cacca22.txt": "a recorded profile of the repository's "
    "benchmarks, not part of the installed package",
}
REPO_TOPS = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")}
MENTION = re.compile(r"^(?P<path>[\w.-]+(?:/[\w.-]+)+)(?::(?P<line>\d+))?$")
LINE = re.compile(
    r'<span class="src-line" id="L(\d+)"><a class="src-ln" href="#L(\d+)"[^>]*></a>'
    r'<span class="src-text">(.*?)</span></span>\n'
)


def _refusal(page: str) -> str:
    found = re.search(r'<p class="source-refusal">(.*?)</p>', page, re.S)
    assert found, "a refusal page says why"
    return html.unescape(found.group(1))


def _lines(page: str) -> list[tuple[int, int, str]]:
    found = LINE.findall(page)
    return [(int(a), int(b), html.unescape(re.sub(r"<[^>]+>", "", t))) for a, b, t in found]


# -- a file ----------------------------------------------------------------------------------


def test_a_kernel_file_is_shown_highlighted_numbered_and_whole(client: TestClient) -> None:
    path = "kernels/problems/sgemm/solutions/correct/gemm_01_naive.cu"
    source = (ROOT / path).read_text()
    page = client.get(f"/source/{path}")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    text = page.text
    assert '<span class="kt">float</span>' in text  # CUDA, coloured by Pygments
    lines = _lines(text)
    assert [n for n, _, _ in lines] == list(range(1, source.count("\n") + 1))
    assert all(a == b for a, b, _ in lines), "each number links to its own line"
    assert "\n".join(t for _, _, t in lines) + "\n" == source
    assert fmt.bytes_(len(source.encode())) in text and f"{len(lines)} lines" in text
    assert "CUDA C++" in text and 'href="/"' in text
    # The chapter that cites the file is offered as the way back.
    assert 'href="/book/p2/gemm-naive"' in text


def test_python_and_toml_files_are_shown(client: TestClient) -> None:
    check = client.get("/source/kernels/check.py").text
    assert '<span class="k">def</span>' in check and 'id="L42"' in check and 'href="#L42"' in check
    toml = client.get("/source/kernels/problems/sgemm/problem.toml")
    assert toml.status_code == 200 and "TOML" in toml.text


def test_every_servable_file_is_text_and_each_kind_opens(client: TestClient) -> None:
    paths = installed_tree().files()
    assert "kernels/check.py" in paths and "kernels/problems/sgemm/reference.py" in paths
    assert "workers/sandbox.py" in paths and "bench/results/gemm_ladder.json" in paths
    kinds: dict[tuple[str, str], str] = {}
    for path in paths:
        (ROOT / path).read_bytes().decode("utf-8")  # the view shows UTF-8 text only
        kinds.setdefault((path.split("/")[0], Path(path).suffix), path)
    assert len(kinds) >= 6, kinds
    for path in kinds.values():
        if (ROOT / path).stat().st_size <= MAX_BYTES:
            assert client.get(f"/source/{path}").status_code == 200, path


# -- refusals --------------------------------------------------------------------------------

REFUSED = {
    # Encoded dots and slashes: refused before the path is even looked at.
    "/source/kernels/..%2f..%2fpyproject.toml": "percent-encoded",
    "/source/%2e%2e/pyproject.toml": "percent-encoded",
    "/source/kernels/%2e%2e/%2e%2e/pyproject.toml": "percent-encoded",
    "/source/kernels%2fcheck.py": "percent-encoded",
    "/source/%2fetc%2fpasswd": "percent-encoded",
    "/source/kernels/check.py%00": "percent-encoded",
    # Absolute paths, folders, hidden and cache files.
    "/source//etc/passwd": "never at /",
    "/source/kernels/problems": "is a folder",
    "/source/kernels/problems/sgemm/": "empty name",
    "/source": "Give the path of a file",
    "/source/kernels/.env": "do not start with a dot",
    "/source/kernels/__pycache__/check.cpython-311.pyc": "'__pycache__'",
    # A suffix the view does not show, in a folder it does.
    "/source/bench/results/gemm_stalls_h200_2c3dc96.txt": "only .json, .md files",
    # Outside the allow-list: the app, settings, tests, the project file, scripts.
    "/source/app/main.py": "unknown source folder 'app'",
    "/source/kplay/config.py": "unknown source folder 'kplay'",
    "/source/tests/app/conftest.py": "outside the folders",
    "/source/pyproject.toml": "outside the folders",
    "/source/bench/tune_gpu.py": "unknown source folder 'bench'",
    # Near misses.
    "/source/kernels/chek.py": "did you mean 'kernels/check.py'?",
    "/source/kernel/check.py": "did you mean 'kernels'?",
    "/source/kernels/problems/sgem/reference.py": "did you mean 'kernels/problems/sgemm/'?",
    # Too large to show.
    "/source/bench/results/problem_runs_h200.json": "more than the 256 KiB",
}


@pytest.mark.parametrize("url", sorted(REFUSED))
def test_refusals_are_404_pages_that_say_why(client: TestClient, url: str) -> None:
    page = client.get(url)
    assert page.status_code == 404 and "<html" in page.text and "Not shown here" in page.text
    assert REFUSED[url] in _refusal(page.text)
    assert "[build-system]" not in page.text and "root:" not in page.text


async def _raw_get(app: FastAPI, path: str) -> tuple[int, str]:
    """GET `path` exactly as written: HTTP clients would remove its dot segments first."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 50000), "server": ("testserver", 80),
    }  # fmt: skip
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status = next(int(m["status"]) for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, body.decode()


@pytest.mark.parametrize(
    "path", ["/source/kernels/../../pyproject.toml", "/source/../pyproject.toml", "/source/./x.py"]
)
def test_dot_segments_are_refused(client: TestClient, app: FastAPI, path: str) -> None:
    status, page = anyio.run(_raw_get, app, path)
    assert status == 404 and "segment is not allowed" in _refusal(page)
    assert "[build-system]" not in page


@pytest.fixture
def tree(tmp_path: Path) -> SourceTree:
    """A small tree with links out of it and into it, a binary file and an empty one."""
    inside, outside = tmp_path / "kernels", tmp_path / "outside"
    (inside / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.py").write_text("TOKEN = 'do-not-show'\n")
    (inside / "ok.py").write_text("x = 1\n")
    (inside / "empty.py").write_text("")
    (inside / "sub" / "latin1.py").write_bytes(b"name = '\xe9'\n")
    (inside / "escape.py").symlink_to(outside / "secret.py")
    (inside / "alias.py").symlink_to(inside / "ok.py")
    (inside / "linked").symlink_to(outside, target_is_directory=True)
    return SourceTree((Root("kernels", inside, CODE_SUFFIXES),))


def test_links_are_refused_in_or_out_of_the_tree(client: TestClient, tree: SourceTree) -> None:
    client.app.state.source_tree = tree  # type: ignore[attr-defined]
    assert client.get("/source/kernels/ok.py").status_code == 200
    for path in ("kernels/escape.py", "kernels/alias.py", "kernels/linked/secret.py"):
        page = client.get(f"/source/{path}")
        assert page.status_code == 404 and "goes through a link" in _refusal(page.text)
        assert "do-not-show" not in page.text
    assert tree.files() == ["kernels/empty.py", "kernels/ok.py", "kernels/sub/latin1.py"]


def test_empty_and_undecodable_files(client: TestClient, tree: SourceTree) -> None:
    client.app.state.source_tree = tree  # type: ignore[attr-defined]
    empty = client.get("/source/kernels/empty.py")
    assert (
        empty.status_code == 200 and "This file is empty" in empty.text and "0 lines" in empty.text
    )
    latin = client.get("/source/kernels/sub/latin1.py")
    assert latin.status_code == 404 and "not UTF-8 text" in _refusal(latin.text)


# -- the book's links ------------------------------------------------------------------------


def _mentions(path: Path) -> list[tuple[int, str, int | None]]:
    """(line, repository path, line it points at) for each code span of prose naming a path."""
    out = []
    for token in markdown().parse(path.read_text()):
        for child in token.children or ():
            found = MENTION.match(child.content) if child.type == "code_inline" else None
            if found and found["path"].split("/")[0] in REPO_TOPS:
                at = found["line"]
                out.append(((token.map or [0])[0] + 1, found["path"], int(at) if at else None))
    return out


@pytest.fixture(scope="module")
def book() -> Book:
    return Book(Settings().book_dir, load_catalog(), Settings().results_dir)


def test_the_book_names_paths_and_every_one_exists(book: Book) -> None:
    seen = set()
    for chapter in book.chapters():
        for line, path, at in _mentions(chapter.path):
            where = f"{chapter.path.name}:{line}: `{path}`"
            assert (ROOT / path).is_file(), f"{where} names a file that does not exist"
            if at is not None:
                count = (ROOT / path).read_text().count("\n")
                assert at <= count, f"{where}:{at} is past the file's {count} lines"
            seen.add(path)
    assert "kernels/problems/sgemm/solutions/correct/gemm_01_naive.cu" in seen
    assert set(NOT_SERVED) <= seen, "NOT_SERVED names paths the book no longer mentions"


def test_every_path_the_book_names_is_linked_or_deliberately_not(
    client: TestClient, book: Book
) -> None:
    tree = installed_tree()
    for chapter in book.chapters():
        prose = "".join(s for s in chapter.segments if isinstance(s, str))
        linked = set(re.findall(r'<a class="source-link" href="(/source/[^"]+)">', prose))
        expected = set()
        for _line, path, at in _mentions(chapter.path):
            if path in NOT_SERVED:
                assert not tree.exists(path), f"{path} is servable: take it off NOT_SERVED"
                assert f'href="/source/{path}' not in prose
            else:
                assert tree.exists(path), f"{chapter.path.name}: `{path}` is not servable"
                expected.add(f"/source/{path}" + (f"#L{at}" if at else ""))
        assert linked == expected, chapter.path.name
        for href in linked:
            url, _, anchor = href.partition("#")
            page = client.get(url)
            assert page.status_code == 200, href
            assert not anchor or f'id="{anchor}"' in page.text


def test_the_renderer_links_only_existing_files_outside_links_and_code_blocks() -> None:
    text = (
        "See `kernels/check.py`, `kernels/check.py:42`, `kernels/check.py:99999`, "
        "`kernels/no_such.py`, `app/main.py`, `check.py` and "
        "[the checker `kernels/check.py`](https://example.org/).\n\n"
        "```text\nkernels/check.py\n```\n"
    )
    body = "".join(s for s in render(text, Path("t.md"), {}, "t").segments if isinstance(s, str))
    links = re.findall(r'<a class="source-link" href="([^"]+)"><code>([^<]+)</code></a>', body)
    assert links == [
        ("/source/kernels/check.py", "kernels/check.py"),
        ("/source/kernels/check.py#L42", "kernels/check.py:42"),
    ]
    assert '<a href="https://example.org/">the checker <code>kernels/check.py</code></a>' in body


# -- the installed package -------------------------------------------------------------------


def _glob(pattern: str) -> re.Pattern[str]:
    out = re.escape(pattern).replace(r"\*\*/", "(?:[^/]+/)*").replace(r"\*", "[^/]*")
    return re.compile(out + "$")


def test_every_servable_file_ships_in_the_wheel() -> None:
    """Per pyproject.toml: each file the checkout serves is a module of a listed package or
    matches its package's data, so an installed wheel shows the same files."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {folder: package for package, folder in tool["package-dir"].items()}
    for path in installed_tree().files():
        folder = next(f for f in sorted(folders, key=len, reverse=True) if path.startswith(f + "/"))
        package, rel = folders[folder], path[len(folder) + 1 :]
        module_package = ".".join([package, *rel.split("/")[:-1]])
        shipped = (rel.endswith(".py") and module_package in tool["packages"]) or any(
            _glob(p).match(rel) for p in tool["package-data"].get(package, [])
        )
        assert shipped, f"{path} is served from a checkout but not installed by the wheel"


@pytest.mark.slow
def test_an_installed_wheel_serves_the_same_files(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "node_modules",
        "test-artifacts", ".pytest_cache", ".mypy_cache", ".ruff_cache",
    ))  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("kernel_playground-*.whl")
    unpacked = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(unpacked)
    probe = (
        "import json, kplay\nfrom kplay.app.services.sourceview import installed_tree\n"
        "t = installed_tree()\nt.read('kernels/check.py')\n"
        "print(json.dumps([kplay.__file__, [str(r.folder) for r in t.roots], t.files()]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env={"PYTHONPATH": str(unpacked)},
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    where, folders, files = json.loads(done.stdout)
    assert where.startswith(str(unpacked)) and all(f.startswith(str(unpacked)) for f in folders)
    # The checkout may hold files others are adding; the wheel was built from this same tree.
    assert (
        files
        == SourceTree(
            tuple(Root(r.prefix, source / r.prefix, r.suffixes) for r in installed_tree().roots)
        ).files()
    )
