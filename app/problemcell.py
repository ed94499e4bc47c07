"""A cell of the problem catalog's own, for a problem no chapter embeds.

Its id is `problem-<slug>`, fixed by the slug alone, so a reader's runs and history stay with
the problem whatever the book does. No chapter may give a cell an id of that form (the book
refuses one), so the two kinds of cell never share an id.
"""

from __future__ import annotations

from collections.abc import Mapping

from kplay.app.bookmd import CellSpec
from kplay.kernels.problem import ProblemSpec

PREFIX = "problem-"


def problem_cell_id(slug: str) -> str:
    return PREFIX + slug


def is_problem_cell_id(cell_id: str) -> bool:
    return cell_id.startswith(PREFIX)


def problem_cell(cell_id: str, problems: Mapping[str, ProblemSpec]) -> CellSpec | None:
    """The catalog's cell of `cell_id`, offering every backend of its problem; None when the
    id is not of that form or names no problem."""
    if not is_problem_cell_id(cell_id):
        return None
    problem = problems.get(cell_id.removeprefix(PREFIX))
    if problem is None:
        return None
    return CellSpec(
        id=cell_id,
        problem=problem.slug,
        backend=problem.backends[0],
        backends=tuple(problem.backends),
        title=None,
        chapter="",
        path=problem.folder / "problem.toml",
        line=0,
    )
