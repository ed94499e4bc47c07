"""What the run card says about memory levels: where the memory roof was measured and
where the timed case's bytes lived (kernels.sizing). The two should be the same level; a
CPU case that a cap kept small, or one kept in a cache on purpose, says so."""

from __future__ import annotations

from kplay.app import format as fmt
from kplay.kernels.models import RooflineStage
from kplay.kernels.sizing import LLC_MULTIPLE


def short_level(level: str) -> str:
    """'DRAM, partly the last-level cache (...)' -> 'DRAM, partly the last-level cache'."""
    return level.split(" (", 1)[0]


def bound_note(r: RooflineStage) -> str:
    """The note under the headline percentage: the bound, and the roof's level."""
    if r.memory_level and r.bound == "memory" and r.note == "memory-bound":
        return f"memory-bound, against the {short_level(r.memory_level)} roof"
    return r.note


def roof_note(r: RooflineStage) -> str:
    return f"measured in {r.memory_level}" if r.memory_level else ""


def stated_level(problem: str, case: str | None) -> str | None:
    """The cache level a benchmark case says it measures (its `measures`), if it says one."""
    if not case:
        return None
    from kplay.kernels.catalog import get_problem

    try:
        spec = get_problem(problem)
    except (KeyError, ValueError):
        return None
    return next((c.measures for c in spec.benchmarks if c.name == case), None)


def case_rows(r: RooflineStage, problem: str, case: str | None) -> list[tuple[str, str, str]]:
    """(label, value, note) rows saying where the case's bytes lived."""
    stated = stated_level(problem, case)
    if not r.llc_bytes:
        return [("case lives in", stated, fmt.bytes_(r.bytes))] if stated else []
    llc = fmt.bytes_(r.llc_bytes)
    multiple = r.llc_multiple or 0.0
    if multiple >= 1:
        share = f"{fmt.sig3(multiple)}× the {llc} last-level cache"
    else:
        share = f"within the {llc} last-level cache"
    if stated:
        where = stated
    elif multiple >= LLC_MULTIPLE:
        where = f"DRAM: {share}"
    else:
        where = (
            f"DRAM and partly the last-level cache: a cap stopped the case at {share}, "
            f"short of {LLC_MULTIPLE}×, so the cache may serve some of its bytes"
        )
    return [("case lives in", where, f"{fmt.bytes_(r.bytes)}, {share}")]
