"""What the simulated learners of bench/loadtest.py read and run: the book's chapters and
cells, and real sources from kernels/problems/<slug>/ (starter, correct, wrong, and correct
with a loop that never ends)."""

from __future__ import annotations

import contextlib
import random
from collections import defaultdict
from dataclasses import dataclass

PYTHON_BACKENDS = {"numba-cpu", "numba-cuda", "triton"}


@dataclass(frozen=True)
class Cell:
    id: str
    problem: str
    backends: tuple[str, ...]
    # A "predict, then run" cell's prediction, sent with each Run as the page's form does
    # (such a cell refuses a run without one); None for the other cells.
    prediction: str | None = None


def _prediction(spec: object) -> str | None:
    exercise = getattr(spec, "exercise", None)
    if getattr(exercise, "kind", None) != "predict":
        return None
    choices = getattr(exercise, "choices", None)
    return str(choices[0][0]) if choices else "1"


@dataclass(frozen=True)
class Chapter:
    url: str
    cells: tuple[Cell, ...]


def load_book() -> list[Chapter]:
    """The installed book's chapters and cells, in reading order."""
    from kplay.app.book import Book
    from kplay.config import Settings
    from kplay.kernels.catalog import load_catalog

    settings = Settings()
    book = Book(settings.book_dir, load_catalog(), settings.results_dir)
    return [
        Chapter(
            ch.url,
            tuple(Cell(c.id, c.problem, tuple(c.backends), _prediction(c)) for c in ch.cells),
        )
        for ch in book.chapters()
    ]


def loop_forever(source: str) -> str | None:
    """`source` with `while True: pass` as the first statement of its first jitted function."""
    lines = source.splitlines()
    for i, line in enumerate(lines):
        if not (line.lstrip().startswith("@") and "jit" in line):
            continue
        j = i + 1
        while j < len(lines) and not lines[j].lstrip().startswith("def "):
            j += 1
        while j < len(lines) and not lines[j].split("#")[0].rstrip().endswith(":"):
            j += 1
        body = next((k for k in range(j + 1, len(lines)) if lines[k].split("#")[0].strip()), None)
        if body is None:
            return None
        indent = lines[body][: len(lines[body]) - len(lines[body].lstrip())]
        loop = [f"{indent}while True:", f"{indent}    pass"]
        return "\n".join(lines[:body] + loop + lines[body:]) + "\n"
    return None


class Sources:
    """Per (problem, backend): the starter, correct and wrong solutions, and looping ones."""

    def __init__(self) -> None:
        from kplay.kernels.catalog import get_problem

        self._get = get_problem
        self._cache: dict[tuple[str, str], dict[str, list[tuple[str, str]]]] = {}

    def kinds(self, problem: str, backend: str) -> dict[str, list[tuple[str, str]]]:
        key = (problem, backend)
        if key not in self._cache:
            spec = self._get(problem)
            out: dict[str, list[tuple[str, str]]] = defaultdict(list)
            for kind in ("correct", "wrong"):
                for b, path in spec.solutions(kind):
                    if b == backend:
                        out[kind].append((f"{kind}/{path.name}", path.read_text()))
            with contextlib.suppress(Exception):  # not every backend has a starter
                path = spec.starter_path(backend)
                out["starter"].append((f"starter/{path.name}", path.read_text()))
            if backend in PYTHON_BACKENDS:
                for name, text in out["correct"]:
                    looped = loop_forever(text)
                    if looped is not None:
                        out["loop"].append((f"loop/{name.split('/', 1)[1]}", looped))
            self._cache[key] = dict(out)
        return self._cache[key]


# The share of each kind of source among a learner's runs.
MIX = {"correct": 0.45, "wrong": 0.25, "starter": 0.20, "loop": 0.10}


def pick_source(
    rng: random.Random, kinds: dict[str, list[tuple[str, str]]]
) -> tuple[str, str, str]:
    """(kind, name, source) drawn by MIX among the kinds there are; a looping source stands
    in as a wrong one where the backend cannot loop (CUDA C++ is only compiled)."""
    wanted = rng.choices(list(MIX), weights=list(MIX.values()))[0]
    for kind in (wanted, "wrong", "correct", "starter"):
        if kinds.get(kind):
            name, source = rng.choice(kinds[kind])
            return kind, name, source
    raise LookupError("no source")
