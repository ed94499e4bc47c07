"""The source view: the package's own files, read-only and highlighted, at /source/{path}.

A path is written as the book writes it, from the top of the repository
(`kernels/problems/sgemm/reference.py`), and maps onto the installed package through
`importlib.resources`, so an editable checkout and an installed wheel show the same files.
Only an allow-list is served: a few folders, a few suffixes, plain files under their folder.
Everything else is refused with a sentence that says why (the router answers 404).
"""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass, field
from functools import cache, lru_cache
from html import escape
from importlib.resources import files
from pathlib import Path

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name

from kplay.kernels.names import unknown
from kplay.resources import data_dir

MAX_BYTES = 256 * 1024
MAX_PATH_CHARS = 300
MAX_LISTED = 100
CODE_SUFFIXES = (".py", ".cu", ".cuh", ".toml", ".md")
# Suffix -> (Pygments lexer, the name a reader knows the language by).
LANGUAGES = {
    ".py": ("python", "Python"),
    ".cu": ("cuda", "CUDA C++"),
    ".cuh": ("cuda", "CUDA C++"),
    ".toml": ("toml", "TOML"),
    ".md": ("markdown", "Markdown"),
    ".json": ("json", "JSON"),
}
# One name in a path: letters, digits, '_', '-', '.', and no leading dot (no hidden files, no
# '.' or '..', and nothing percent-encoded survives it).
_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
# A mention in the prose: a path, optionally `:line`.
_MENTION = re.compile(r"^(?P<path>[A-Za-z0-9_][A-Za-z0-9_./-]*)(?::(?P<line>[1-9][0-9]{0,5}))?$")
_SKIPPED_FOLDERS = frozenset({"__pycache__"})


class SourceRefused(Exception):
    """A path the view does not show; `files` are servable paths worth offering instead."""

    def __init__(self, message: str, files: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.files = files


@dataclass(frozen=True)
class Root:
    """A folder of the repository that the view shows, where it is installed, and which
    suffixes of it are shown."""

    prefix: str
    folder: Path
    suffixes: tuple[str, ...]

    def repo_path(self, rel: tuple[str, ...]) -> str:
        return "/".join((self.prefix, *rel))


@dataclass(frozen=True)
class SourceFile:
    path: str
    size: int
    language: str
    # Each line as highlighted HTML, tags balanced within the line.
    lines: tuple[str, ...]


@dataclass(frozen=True)
class SourcePage:
    """What templates/source.html receives: a file, or the reason there is none."""

    title: str
    path: str
    file: SourceFile | None = None
    refusal: str | None = None
    files: tuple[str, ...] = ()
    # (url, label) of the chapters whose prose links to this file.
    cited_by: tuple[tuple[str, str], ...] = field(default_factory=tuple)


def source_url(path: str, line: int | None = None) -> str:
    return f"/source/{path}" + (f"#L{line}" if line else "")


@lru_cache(maxsize=64)
def _highlighted(path: Path, mtime_ns: int, size: int, lexer_name: str) -> tuple[str, ...]:
    text = path.read_bytes().decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    plain = text.split("\n")
    if plain[-1] == "":
        plain.pop()
    lexer = get_lexer_by_name(lexer_name, stripnl=False, ensurenl=True)
    out = highlight(text, lexer, HtmlFormatter(nowrap=True)).split("\n")
    if out and out[-1] == "":
        out.pop()
    if len(out) != len(plain):
        # Pygments keeps one output line per input line; were it ever not to, plain text
        # with the right numbers beats colours on the wrong lines.
        return tuple(escape(line) for line in plain)
    return tuple(out)


class SourceTree:
    """The servable files: `roots` keyed by the repository folder they stand for."""

    def __init__(self, roots: tuple[Root, ...]) -> None:
        self.roots = tuple(sorted(roots, key=lambda r: -r.prefix.count("/")))

    # -- resolving ------------------------------------------------------------------------

    def _segments(self, path: str) -> list[str]:
        shown = path if len(path) <= 80 else path[:77] + "..."
        if not path:
            folders = ", ".join(f"{r.prefix}/" for r in sorted(self.roots, key=lambda r: r.prefix))
            raise SourceRefused(
                "Give the path of a file, as the book writes it, such as kernels/check.py: "
                f"the view shows files under {folders}."
            )
        if len(path) > MAX_PATH_CHARS:
            raise SourceRefused(f"A path of {len(path)} characters is longer than any here.")
        if path.startswith("/") or "\\" in path or "\x00" in path:
            raise SourceRefused(
                f"{shown!r} is not a path inside the package: paths start at the top of the "
                "repository, such as kernels/check.py, never at / and never with a backslash."
            )
        parts = path.split("/")
        for part in parts:
            if part in ("..", "."):
                raise SourceRefused(
                    f"{shown!r}: a {part!r} segment is not allowed in a source path."
                )
            if not part:
                raise SourceRefused(f"{shown!r} has an empty name in it (a doubled or trailing /).")
            if not _SEGMENT.match(part) or part in _SKIPPED_FOLDERS:
                raise SourceRefused(
                    f"{shown!r}: the name {part[:40]!r} is not one this view shows (names are "
                    "letters, digits, '_', '-' and '.', and do not start with a dot)."
                )
        return parts

    def _root(self, parts: list[str]) -> tuple[Root, tuple[str, ...]]:
        for root in self.roots:
            head = root.prefix.split("/")
            if parts[: len(head)] == head:
                return root, tuple(parts[len(head) :])
        known = [r.prefix for r in self.roots]
        raise SourceRefused(
            f"{'/'.join(parts)!r} is outside the folders this view shows: "
            + unknown("source folder", parts[0], known)
        )

    def _walk(self, root: Root, rel: tuple[str, ...]) -> Path:
        """The file on disk, refused if any step below the root is a link."""
        here = root.folder
        for part in rel:
            here = here / part
            if here.is_symlink():
                raise SourceRefused(f"{root.repo_path(rel)!r} goes through a link: not shown.")
        return here

    def resolve(self, path: str) -> tuple[Root, Path]:
        """The root and the real file behind `path`, or SourceRefused with the reason."""
        root, rel = self._root(self._segments(path))
        shown = root.repo_path(rel)
        target = self._walk(root, rel)
        if not rel or target.is_dir():
            inside = self._files_under(root, rel) if target.is_dir() else []
            listed = tuple(inside[:MAX_LISTED])
            more = f" (the first {MAX_LISTED} of {len(inside)})" if len(inside) > MAX_LISTED else ""
            raise SourceRefused(
                f"{shown} is a folder; the view shows one file at a time"
                + (f": the files in it are below{more}." if listed else "."),
                listed,
            )
        suffix = Path(rel[-1]).suffix
        if suffix not in root.suffixes:
            raise SourceRefused(
                f"{shown!r}: only {', '.join(root.suffixes)} files under {root.prefix}/ are shown."
            )
        if not target.exists():
            raise SourceRefused(self._near_miss(root, rel))
        real = target.resolve(strict=True)
        info = real.stat()
        if not real.is_relative_to(root.folder.resolve()) or not stat.S_ISREG(info.st_mode):
            raise SourceRefused(f"{shown!r} is not a plain file of the package: not shown.")
        if info.st_size > MAX_BYTES:
            raise SourceRefused(
                f"{shown} is {info.st_size // 1024} KiB, more than the {MAX_BYTES // 1024} KiB "
                "this view shows."
            )
        return root, real

    def _near_miss(self, root: Root, rel: tuple[str, ...]) -> str:
        """The 'did you mean' for a file that is not there, among its deepest existing folder."""
        depth = len(rel) - 1
        while depth > 0 and not self._walk(root, rel[:depth]).is_dir():
            depth -= 1
        folder = rel[:depth]
        known = list(self._listing(root, folder)) + [
            root.repo_path((*folder, sub)) + "/" for sub in self._subfolders(root, folder)
        ]
        return unknown("path", root.repo_path(rel), known)

    # -- listing --------------------------------------------------------------------------

    def _subfolders(self, root: Root, rel: tuple[str, ...]) -> list[str]:
        here = root.folder.joinpath(*rel)
        return sorted(
            p.name
            for p in here.iterdir()
            if p.is_dir() and not p.is_symlink() and _SEGMENT.match(p.name)
            and p.name not in _SKIPPED_FOLDERS
        )  # fmt: skip

    def _listing(self, root: Root, rel: tuple[str, ...]) -> tuple[str, ...]:
        here = root.folder.joinpath(*rel)
        return tuple(
            sorted(
                root.repo_path((*rel, p.name))
                for p in here.iterdir()
                if p.suffix in root.suffixes and _SEGMENT.match(p.name)
                and not p.is_symlink() and p.is_file()
            )
        )  # fmt: skip

    def _files_under(self, root: Root, rel: tuple[str, ...]) -> list[str]:
        out = list(self._listing(root, rel))
        for sub in self._subfolders(root, rel):
            out += self._files_under(root, (*rel, sub))
        return out

    def files(self) -> list[str]:
        """Every servable path, sorted."""
        return sorted(f for root in self.roots for f in self._files_under(root, ()))

    # -- reading --------------------------------------------------------------------------

    def read(self, path: str) -> SourceFile:
        _root, real = self.resolve(path)
        lexer, language = LANGUAGES[real.suffix]
        info = real.stat()
        try:
            lines = _highlighted(real, info.st_mtime_ns, info.st_size, lexer)
        except UnicodeDecodeError as exc:
            raise SourceRefused(f"{path} is not UTF-8 text: not shown.") from exc
        return SourceFile(path=path, size=info.st_size, language=language, lines=lines)

    def exists(self, path: str) -> bool:
        try:
            self.resolve(path)
        except SourceRefused:
            return False
        return True

    def href(self, mention: str) -> str | None:
        """The view's URL for a mention in the prose (`path` or `path:line`), when the file is
        servable and the line is in it; None otherwise."""
        found = _MENTION.match(mention.strip())
        if found is None or "/" not in found["path"]:
            return None
        path, line = found["path"], found["line"]
        try:
            _root, real = self.resolve(path)
        except SourceRefused:
            return None
        if line is None:
            return source_url(path)
        with real.open("rb") as fh:
            count = sum(1 for _ in fh)
        return source_url(path, int(line)) if int(line) <= count else None


def _package_dir(package: str) -> Path:
    folder = Path(str(files(package)))
    if not folder.is_dir():
        raise RuntimeError(f"{package} is not installed as a folder on disk ({folder})")
    return folder


@cache
def installed_tree() -> SourceTree:
    """The files of this installation: the engine and its problems, the workers, and the
    measured results the book's figures are drawn from."""
    return SourceTree(
        (
            Root("kernels", _package_dir("kplay.kernels"), CODE_SUFFIXES),
            Root("workers", _package_dir("kplay.workers"), (".py",)),
            Root("bench/results", data_dir("results"), (".json", ".md")),
        )
    )


def source_href(mention: str) -> str | None:
    """What the book's renderer links an inline code span to, if anything."""
    return installed_tree().href(mention)
