"""What a problem folder may hold, and what a folder of problems may hold.

Nothing in a problem folder is skipped without a word: a file the loader does not know
(a solution with a suffix no backend reads, a `problem.tml`, a stray note) is an error
that names it, so that a kernel is never left unchecked because of its file name.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kplay.kernels.problem import SUFFIXES, backend_for_path

TOML = "problem.toml"
# What a problem folder holds at its top, besides the folders below.
TOP_FILES = {TOML, "reference.py", "README.md"}
SOLUTION_KINDS = ("correct", "wrong", "cheating")
# Left alone wherever they are: Python's bytecode caches and hidden files (.gitkeep).
IGNORED_DIRS = {"__pycache__"}

Refuse = Callable[[Path, str | None, str], Exception]


def ignored(path: Path) -> bool:
    return path.name in IGNORED_DIRS or path.name.startswith(".")


def _suffixes() -> str:
    return ", ".join(f"*{s}" for s in SUFFIXES.values())


def check_layout(folder: Path, backends: list[str], refuse: Refuse) -> None:
    """Refuse (`refuse(path, field, message)` builds the error) any entry of the folder that
    is not part of a problem, and any kernel file for a backend the problem does not offer."""
    for path in sorted(folder.iterdir()):
        if ignored(path):
            continue
        if path.is_file() and path.name in TOP_FILES:
            continue
        if path.is_dir() and path.name == "starter":
            _check_kernels(path, backends, refuse)
            continue
        if path.is_dir() and path.name == "solutions":
            for kind in sorted(path.iterdir()):
                if ignored(kind):
                    continue
                if not kind.is_dir() or kind.name not in SOLUTION_KINDS:
                    raise refuse(
                        kind,
                        None,
                        "unknown entry under solutions/: it holds the folders "
                        f"{', '.join(SOLUTION_KINDS)} and nothing else",
                    )
                _check_kernels(kind, backends, refuse)
            continue
        hint = _near_miss(path.name)
        raise refuse(
            path,
            None,
            "unknown entry in a problem folder, which holds problem.toml, reference.py, "
            f"README.md, starter/ and solutions/{hint}",
        )


def _check_kernels(folder: Path, backends: list[str], refuse: Refuse) -> None:
    for path in sorted(folder.iterdir()):
        if ignored(path):
            continue
        backend = backend_for_path(path)
        if not path.is_file() or backend is None:
            raise refuse(
                path,
                None,
                f"not a kernel file: a file here is named for its backend ({_suffixes()})",
            )
        if backend not in backends:
            raise refuse(
                path,
                None,
                f"a {backend} kernel, and the problem offers {', '.join(backends)} "
                "(add the backend to problem.toml, or remove the file)",
            )


def _near_miss(name: str) -> str:
    low = name.lower()
    if low.endswith((".toml", ".tml")) or low.startswith("problem"):
        return f"; did you mean {TOML}?"
    if low.startswith("reference") or low.startswith("ref"):
        return "; did you mean reference.py?"
    if low in ("starters", "solution", "solutions.py"):
        return "; did you mean starter/ or solutions/?"
    return ""


def problem_folders(root: Path, refuse: Refuse) -> list[Path]:
    """The problem folders of `root`: its subfolders, each of which must hold problem.toml,
    or `root` itself when it is one problem's folder (as KPLAY_EXTRA_PROBLEMS may name)."""
    if (root / TOML).is_file():
        return [root]
    out = []
    for path in sorted(root.iterdir()):
        if ignored(path) or not path.is_dir():
            continue
        # Git keeps no empty folders: one without a single file (left by a checkout of
        # another branch, or a problem still being written) is nothing, not a broken problem.
        if not any(p.is_file() for p in path.rglob("*")):
            continue
        if not (path / TOML).is_file():
            found = sorted(p.name for p in path.iterdir() if not ignored(p))
            near = [n for n in found if _near_miss(n).endswith(f"{TOML}?")]
            what = f" (found {', '.join(near)}; the name is {TOML})" if near else ""
            raise refuse(path / TOML, None, f"missing problem.toml{what}")
        out.append(path)
    return out
