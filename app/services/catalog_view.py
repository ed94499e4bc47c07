"""The problem catalog's pages: `/problems` lists every problem and exercise, and
`/problems/<slug>` opens one as a runnable cell.

A problem page shows a chapter's cell where the book embeds the problem (the one that offers
the most backends, the first in reading order among equals), so a run there is the
chapter's run too; a problem no chapter embeds gets the catalog's own cell
(app.problemcell). Either way the runs, the card and the history are a cell's as anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kplay.app.book import Book, CellSpec, Chapter
from kplay.app.contexts import CellView
from kplay.app.problemcell import problem_cell, problem_cell_id
from kplay.app.services import views
from kplay.app.services.gpu_picker import device_choices
from kplay.app.services.problems import backend_title
from kplay.app.services.progress import CORRECT, Progress, ReaderProgress, reader_progress
from kplay.app.services.runs import RunService
from kplay.kernels.problem import ArgSpec, ProblemSpec, Tier

ROLES = {
    "in": "input",
    "out": "output",
    "inout": "input and output",
    "scalar": "scalar",
    "param": "size",
}


@dataclass(frozen=True)
class ArgRow:
    name: str
    role: str
    dtype: str
    shape: str
    description: str


@dataclass(frozen=True)
class TierRow:
    name: str
    bar: str  # what it takes, e.g. "≥ 75 % of the roofline"
    description: str
    reached: bool


@dataclass(frozen=True)
class CellLink:
    """A chapter cell that embeds the problem, with this reader's progress in it."""

    chapter: str
    cell_id: str
    title: str
    url: str
    progress: Progress


@dataclass(frozen=True)
class ProblemEntry:
    slug: str
    title: str
    summary: str
    exercise: bool
    url: str
    args: list[ArgRow]
    backends: list[str]
    tiers: list[TierRow]
    tags: list[str]
    progress: Progress
    chapters: list[CellLink] = field(default_factory=list)


@dataclass(frozen=True)
class CatalogSection:
    key: str
    title: str
    entries: list[ProblemEntry]


@dataclass(frozen=True)
class CatalogPage:
    title: str
    sections: list[CatalogSection]

    @property
    def entries(self) -> list[ProblemEntry]:
        return [e for s in self.sections for e in s.entries]

    @property
    def count(self) -> int:
        return len(self.entries)

    @property
    def solved(self) -> int:
        """How many this reader has a correct run for."""
        return sum(1 for e in self.entries if e.progress.rank >= CORRECT)

    @property
    def tiered(self) -> int:
        return sum(1 for e in self.entries if e.progress.tier is not None)


@dataclass(frozen=True)
class ProblemPage:
    title: str
    entry: ProblemEntry
    cell: CellView
    # The chapter cell shown here, or None for the catalog's own cell.
    home: CellLink | None


@dataclass(frozen=True)
class MissingPage:
    title: str
    message: str
    # The problem the message suggests instead, if any.
    suggestion: str | None


def missing_page(message: str, catalog: Mapping[str, ProblemSpec]) -> MissingPage:
    """The 404 page of a slug the catalog lacks; `message` is kernels.names.unknown's."""
    close = next((s for s in sorted(catalog) if f"did you mean {s!r}" in message), None)
    return MissingPage(title="No such problem", message=message, suggestion=close)


def _shape(arg: ArgSpec) -> str:
    if arg.is_array:
        return f"[{', '.join(arg.shape)}]" if arg.shape else "[ ]"
    return "one value"


def _bar(tier: Tier) -> str:
    parts = []
    if tier.percent_of_roofline is not None:
        parts.append(f"≥ {tier.percent_of_roofline:g} % of the roofline")
    if tier.percent_of_baseline is not None:
        parts.append(f"≥ {tier.percent_of_baseline:g} % of the baseline's speed")
    return " and ".join(parts) or "correct"


def _tiers(problem: ProblemSpec, progress: Progress) -> list[TierRow]:
    reached = problem.tiers.index(progress.tier) if progress.tier in problem.tiers else -1
    return [
        TierRow(t.name, _bar(t), t.description, i <= reached) for i, t in enumerate(problem.tiers)
    ]


def embedding_cells(book: Book) -> dict[str, list[tuple[Chapter, CellSpec]]]:
    """Every chapter cell per problem slug, in reading order."""
    out: dict[str, list[tuple[Chapter, CellSpec]]] = {}
    for chapter in book.chapters():
        for cell in chapter.cells:
            out.setdefault(cell.problem, []).append((chapter, cell))
    return out


def _links(
    found: list[tuple[Chapter, CellSpec]], problem: ProblemSpec, progress: ReaderProgress
) -> list[CellLink]:
    return [
        CellLink(
            chapter=chapter.label,
            cell_id=cell.id,
            title=cell.title or problem.title,
            url=f"{chapter.url}#cell-{cell.id}",
            progress=progress.cell(cell.id),
        )
        for chapter, cell in found
    ]


def entry(
    problem: ProblemSpec, embedded: list[tuple[Chapter, CellSpec]], progress: ReaderProgress
) -> ProblemEntry:
    mine = progress.problem(problem.slug)
    return ProblemEntry(
        slug=problem.slug,
        title=problem.title,
        summary=problem.summary,
        exercise=problem.exercise,
        url=f"/problems/{problem.slug}",
        args=[
            ArgRow(a.name, ROLES.get(a.role, a.role), a.dtype, _shape(a), a.description)
            for a in problem.args
        ],
        backends=[backend_title(b) for b in problem.backends],
        tiers=_tiers(problem, mine),
        tags=list(problem.tags),
        progress=mine,
        chapters=_links(embedded, problem, progress),
    )


def catalog_page(
    book: Book, catalog: Mapping[str, ProblemSpec], svc: RunService, user: str
) -> CatalogPage:
    progress = reader_progress(svc.db, catalog, user)
    embedded = embedding_cells(book)
    # In the order the book first uses them; those it does not use yet last, by title.
    first = {slug: i for i, slug in enumerate(embedded)}
    problems = sorted(
        catalog.values(), key=lambda p: (first.get(p.slug, len(first)), p.title.lower(), p.slug)
    )
    entries = [entry(p, embedded.get(p.slug, []), progress) for p in problems]
    return CatalogPage(
        title="Problems",
        sections=[
            CatalogSection("problems", "Problems", [e for e in entries if not e.exercise]),
            CatalogSection("exercises", "Exercises", [e for e in entries if e.exercise]),
        ],
    )


def home_cell(problem: ProblemSpec, embedded: list[tuple[Chapter, CellSpec]]) -> CellSpec:
    """The cell a problem page shows (see the module's docstring)."""
    if embedded:
        return max(embedded, key=lambda pair: len(pair[1].backends))[1]
    cell = problem_cell(problem_cell_id(problem.slug), {problem.slug: problem})
    assert cell is not None
    return cell


def problem_page(
    book: Book, catalog: Mapping[str, ProblemSpec], svc: RunService, slug: str, user: str
) -> ProblemPage:
    """KeyError when the catalog has no problem `slug`."""
    problem = catalog[slug]
    embedded = embedding_cells(book).get(slug, [])
    spec = home_cell(problem, embedded)
    progress = reader_progress(svc.db, catalog, user)
    found = entry(problem, embedded, progress)
    home = next((link for link in found.chapters if link.cell_id == spec.id), None)
    cell = views.cell_view(svc, spec, user, device_choices(svc.executor))
    return ProblemPage(title=problem.title, entry=found, cell=cell, home=home)
