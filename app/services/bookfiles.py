"""The current edition's PDF and EPUB, built by the server itself and kept until the book
changes (the download links of the contents page).

An edition is named by a fingerprint of what it is built from: every chapter and terms file
(path, size, time of change), every record in the results folder, and the playground address
its "run this online" links point to. The first request for a format starts its build in a
background thread and answers at once that it is being built; later requests find the file.
A failed build is remembered with its message until the book changes, so a broken chapter
is reported rather than rebuilt on every request. Building needs the `book` extra
(WeasyPrint, ebooklib); without it the answer says what to install.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Literal

Format = Literal["pdf", "epub"]
FORMATS: dict[str, tuple[str, str]] = {
    # format: (the module its build needs, the media type)
    "pdf": ("weasyprint", "application/pdf"),
    "epub": ("ebooklib", "application/epub+zip"),
}


@dataclass(frozen=True)
class Status:
    state: Literal["ready", "building", "failed", "unavailable"]
    path: Path | None = None
    message: str = ""


def fingerprint(book_dir: Path, results_dir: Path, playground: str) -> str:
    digest = hashlib.sha256(playground.encode())
    files = [*Path(book_dir).rglob("*.md"), *Path(book_dir).rglob("*.toml")]
    files += list(Path(results_dir).glob("*.json"))
    for path in sorted(files):
        try:
            stat = path.stat()
        except OSError:
            continue
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


class BookFiles:
    """Builds and keeps the edition's files under `folder` (one folder per fingerprint)."""

    def __init__(self, folder: Path, book_dir: Path, results_dir: Path) -> None:
        self.folder = Path(folder)
        self.book_dir = Path(book_dir)
        self.results_dir = Path(results_dir)
        self._lock = threading.Lock()
        self._building: dict[tuple[str, str], threading.Thread] = {}
        self._failed: dict[tuple[str, str], str] = {}

    def _target(self, edition: str, fmt: str) -> Path:
        return self.folder / edition / f"writing-kernels-with-ai.{fmt}"

    def status(self, fmt: Format, playground: str, start: bool = True) -> Status:
        """Where the current edition's file of `fmt` stands; starts its build if `start` and
        it is neither built, nor being built, nor failed."""
        module, _ = FORMATS[fmt]
        if find_spec(module) is None:
            return Status(
                "unavailable",
                message=f"This server cannot build the {fmt.upper()}: it needs {module} "
                "(pip install 'kernel-playground[book]').",
            )
        edition = fingerprint(self.book_dir, self.results_dir, playground)
        target = self._target(edition, fmt)
        key = (edition, fmt)
        with self._lock:
            if target.is_file():
                return Status("ready", target)
            if key in self._failed:
                return Status("failed", message=self._failed[key])
            thread = self._building.get(key)
            if thread is None or not thread.is_alive():
                if not start:
                    return Status("building", message="not started")
                thread = threading.Thread(
                    target=self._build, args=(key, target, playground), daemon=True
                )
                self._building[key] = thread
                thread.start()
        return Status("building", message=f"The {fmt.upper()} of this edition is being built.")

    def wait(self, fmt: Format, playground: str, timeout: float) -> Status:
        """Blocks until the build that `status` started ends or `timeout` passes (tests, CLI)."""
        edition = fingerprint(self.book_dir, self.results_dir, playground)
        thread = self._building.get((edition, fmt))
        if thread is not None:
            thread.join(timeout)
        return self.status(fmt, playground, start=False)

    def _build(self, key: tuple[str, str], target: Path, playground: str) -> None:
        from kplay.app.bookbuild import load_sources

        partial = target.with_suffix(target.suffix + ".part")
        try:
            src = load_sources(playground, book_dir=self.book_dir, results_dir=self.results_dir)
            if key[1] == "pdf":
                from kplay.app.bookpdf import build_pdf

                build_pdf(src, partial)
            else:
                from kplay.app.bookepub import build_epub

                build_epub(src, partial)
            partial.replace(target)  # whole or not at all: a reader never gets half a file
        except Exception as exc:  # noqa: BLE001 - any failure is reported to the reader
            partial.unlink(missing_ok=True)
            with self._lock:
                self._failed[key] = f"The {key[1].upper()} could not be built: {exc}"
