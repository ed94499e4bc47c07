"""A cell's earlier attempts: the list under the cell, diffs, the chart's older points, and
any two attempts side by side (their sources' diff, their numbers, both on one roofline)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, func, or_, select

from kplay.app import format as fmt
from kplay.app.db.models import Run
from kplay.app.services.cards import VERDICTS, parse_result
from kplay.app.services.problems import backend_title
from kplay.app.services.records import is_final
from kplay.app.services.runs import RunNotFound, RunService
from kplay.kernels.models import RunResult, TimingStage


@dataclass(frozen=True)
class Attempt:
    run_id: str
    number: int
    created_at: str
    backend: str
    backend_title: str
    state: str
    verdict: str
    tone: str
    median: str
    percent: str
    diff: str | None
    added: int
    removed: int


def _diff(
    old: Run, new: Run, context: int = 2, names: tuple[str, str] | None = None
) -> tuple[str | None, int, int]:
    if old.source == new.source:
        return None, 0, 0
    before, after = names or (f"attempt {old.id[:8]}", f"attempt {new.id[:8]}")
    lines = list(
        difflib.unified_diff(
            old.source.splitlines(),
            new.source.splitlines(),
            fromfile=before,
            tofile=after,
            lineterm="",
            n=context,
        )
    )
    added = sum(1 for x in lines if x.startswith("+") and not x.startswith("+++"))
    removed = sum(1 for x in lines if x.startswith("-") and not x.startswith("---"))
    return "\n".join(lines), added, removed


def verdict_of(run: Run, result: RunResult | None) -> tuple[str, str]:
    """The verdict's words and tone, as the card says them."""
    if not is_final(run.state):
        return run.state.replace("_", " "), "neutral"
    label, tone = VERDICTS.get(run.state, (run.state, "neutral"))
    if run.state == "done" and result is not None and result.check is None:
        return "Compiled, not run", "neutral"
    return label, tone


def _attempt(run: Run, number: int, older: Run | None) -> Attempt:
    diff, added, removed = _diff(older, run) if older else (None, 0, 0)
    result = parse_result(run) if is_final(run.state) else None
    verdict, tone = verdict_of(run, result)
    timing = result.timing if result else None
    roof = result.roofline if result else None
    return Attempt(
        run_id=run.id,
        number=number,
        created_at=fmt.iso(run.created_at),
        backend=run.backend,
        backend_title=backend_title(run.backend),
        state=run.state,
        verdict=verdict,
        tone=tone,
        median=fmt.duration_us(timing.median_us) if timing and timing.timed else "—",
        percent=fmt.percent(roof.percent_of_roofline) if roof else "—",
        diff=diff,
        added=added,
        removed=removed,
    )


def attempts(runs: list[Run], total: int) -> list[Attempt]:
    """`runs` newest first; each is diffed against the attempt before it on the same backend."""
    out = []
    for i, run in enumerate(runs):
        older = next((r for r in runs[i + 1 :] if r.backend == run.backend), None)
        out.append(_attempt(run, total - i, older))
    return out


def _device(result: RunResult | None) -> str | None:
    return result.roofline.device if result and result.roofline else None


def previous_timed(run: Run, history: list[Run]) -> Run | None:
    """The newest timed run before `run` on the same device (history is newest first)."""
    device = _device(parse_result(run))
    if device is None:
        return None
    for other in history:
        if other.created_at >= run.created_at or other.id == run.id:
            continue
        result = parse_result(other)
        if _device(result) == device and result and result.timing and result.timing.timed:
            return other
    return None


def _frame(result: RunResult) -> dict[str, Any]:
    """The KPlayRoofline.render() input without its points: the device and its ceilings."""
    roof = result.roofline
    assert roof is not None
    return {
        "device": roof.device,
        "source": roof.ceilings_source,
        "memory_bytes_per_s": roof.memory_ceiling_bytes_per_s,
        "compute_flops_per_s": roof.compute_ceiling_flops_per_s,
        "compute_name": roof.compute_ceiling_name,
        "points": [],
    }


def chart(run: Run, history: list[Run], total: int) -> dict[str, Any] | None:
    """The KPlayRoofline.render() input: this run's ceilings, this run and the earlier ones."""
    result = parse_result(run)
    if result is None or result.roofline is None:
        return None
    roof = result.roofline
    numbers = {r.id: total - i for i, r in enumerate(history)}
    out = _frame(result)
    for other in reversed(history):
        if other.id == run.id or other.created_at > run.created_at:
            continue
        other_result = parse_result(other)
        if other_result and other_result.roofline and other_result.roofline.device == roof.device:
            out["points"].append(_point(other_result, f"attempt #{numbers[other.id]}", False))
    label = f"attempt #{numbers[run.id]}" if run.id in numbers else "this run"
    out["points"].append(_point(result, f"{label} (this run)", current=True))
    return out


def single_chart(run: Run, label: str) -> dict[str, Any] | None:
    """One run alone on its device's roofline (a shared run shows no one else's attempts)."""
    result = parse_result(run)
    if result is None or result.roofline is None:
        return None
    out = _frame(result)
    out["points"].append(_point(result, label, current=True))
    return out


def _point(result: RunResult, label: str, current: bool) -> dict[str, Any]:
    roof = result.roofline
    assert roof is not None
    timing = result.timing
    details = {
        "backend": backend_title(result.backend),
        "median": fmt.duration_us(timing.median_us) if timing else "—",
        "throughput": fmt.rate(roof.achieved_flops_per_s, "FLOP/s"),
        "bandwidth": fmt.rate(roof.achieved_bytes_per_s, "B/s"),
        "of roofline": fmt.percent(roof.percent_of_roofline),
    }
    return {
        "label": label,
        "intensity_flops_per_byte": roof.intensity_flops_per_byte,
        "flops_per_s": roof.achieved_flops_per_s,
        "current": current,
        "details": details,
    }


# ---------------------------------------------------------------- launch, as typed


def launch_fields(launch: dict[str, Any] | None) -> dict[str, str]:
    """A stored launch override as the cell's launch fields hold it (their names, as text)."""
    if not launch:
        return {}
    out = {
        "grid": ", ".join(launch.get("grid") or []),
        "block": ", ".join(launch.get("block") or []),
        "shared_mem_bytes": str(launch.get("shared_mem_bytes") or ""),
        "num_warps": "" if launch.get("num_warps") is None else str(launch["num_warps"]),
        "num_stages": "" if launch.get("num_stages") is None else str(launch["num_stages"]),
        "constants": ", ".join(f"{k}={v}" for k, v in (launch.get("constants") or {}).items()),
    }
    return {name: value for name, value in out.items() if value}


def launch_text(launch: dict[str, Any] | None) -> str:
    fields = launch_fields(launch)
    if not fields:
        return "the default"
    return " · ".join(f"{name.replace('_', ' ')} {value}" for name, value in fields.items())


# ---------------------------------------------------------------- two attempts compared


class CompareError(Exception):
    """Two attempts that cannot be compared; `status` is the HTTP status that fits."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Comparison:
    cell: str
    older: Attempt
    newer: Attempt
    rows: list[tuple[str, str, str]]  # (what, older's, newer's)
    diff: str | None
    added: int
    removed: int
    verdict: str  # one sentence: which is faster, or why that cannot be said
    chart: dict[str, Any] | None
    chart_note: str | None


def number_of(svc: RunService, run: Run) -> int:
    """The run's attempt number in its owner's history of its cell (the first is #1)."""
    earlier = or_(
        Run.created_at < run.created_at, and_(Run.created_at == run.created_at, Run.id <= run.id)
    )
    stmt = (
        select(func.count())
        .select_from(Run)
        .where(Run.cell_id == run.cell_id, Run.user == run.user, earlier)
    )
    with svc.db.session() as s:
        return int(s.scalar(stmt) or 0)


def _picked(svc: RunService, cell_id: str, picks: list[str], user: str) -> tuple[Run, Run]:
    ids = list(dict.fromkeys(p.strip() for p in picks if p.strip()))
    if len(ids) != 2:
        got = "none" if not ids else f"{len(ids)}"
        raise CompareError(422, f"pick exactly two different attempts to compare (picked {got})")
    runs = []
    for run_id in ids:
        try:
            run = svc.visible(run_id, user)
        except RunNotFound:
            raise CompareError(404, f"no attempt {run_id!r} of yours") from None
        if run.cell_id != cell_id:
            raise CompareError(422, f"attempt {run_id!r} was not made in cell {cell_id!r}")
        runs.append(run)
    older, newer = sorted(runs, key=lambda r: (r.created_at, r.id))
    return older, newer


def _numbers(result: RunResult | None) -> dict[str, str]:
    timing = result.timing if result else None
    roof = result.roofline if result else None
    timed = bool(timing and timing.timed)
    check = result.check if result else None
    passed = sum(1 for c in check.cases if c.ok) if check else None
    system = result.system if result else None
    return {
        "Device": (roof.device if roof else None) or (system.device if system else None) or "—",
        "Median time": fmt.duration_us(timing.median_us) if timed and timing else "—",
        "Fastest": fmt.duration_us(timing.min_us) if timed and timing else "—",
        "Throughput": fmt.rate(roof.achieved_flops_per_s, "FLOP/s") if roof else "—",
        "Bandwidth": fmt.rate(roof.achieved_bytes_per_s, "B/s") if roof else "—",
        "Of roofline": fmt.percent(roof.percent_of_roofline) if roof else "—",
        "Test cases": f"{passed} of {len(check.cases)} passed" if check else "—",
    }


def _speed(old: RunResult | None, new: RunResult | None, names: tuple[str, str]) -> str:
    older, newer = names
    t_old = old.timing if old else None
    t_new = new.timing if new else None
    old_us = t_old.median_us if t_old and t_old.timed else None
    new_us = t_new.median_us if t_new and t_new.timed else None
    if not old_us or not new_us:
        return "Only timed attempts compare for speed: at least one of these was not timed."
    if _device(old) != _device(new):
        return (
            f"{older} and {newer} were timed on different devices "
            f"({_device(old) or '—'}, {_device(new) or '—'}): their times do not compare."
        )
    factor = old_us / new_us
    apart = fmt.ratio(max(factor, 1 / factor))
    if abs(factor - 1) < 0.005:
        return f"{newer} takes as long as {older}."
    if _overlap(t_old, t_new):
        return (
            f"{newer} and {older} take about as long: {apart} apart, and the middle halves "
            "of their timings overlap, so the difference is within the noise."
        )
    if factor > 1:
        return f"{newer} is {apart} faster than {older}."
    return f"{newer} is {apart} slower than {older}."


def _overlap(a: TimingStage | None, b: TimingStage | None) -> bool:
    """Whether two timings' interquartile ranges overlap; False where one is not known."""
    if a is None or b is None:
        return False
    if a.q1_us is None or a.q3_us is None or b.q1_us is None or b.q3_us is None:
        return False
    return a.q1_us <= b.q3_us and b.q1_us <= a.q3_us


def _pair_chart(
    old: RunResult | None, new: RunResult | None, names: tuple[str, str]
) -> tuple[dict[str, Any] | None, str | None]:
    both = [(r, name) for r, name in zip((old, new), names, strict=True) if r and r.roofline]
    if not both:
        return None, "Neither attempt has a roofline point: only correct, timed runs get one."
    last, _ = both[-1]
    out = _frame(last)
    same = [(r, name) for r, name in both if _device(r) == _device(last)]
    for r, name in same:
        out["points"].append(_point(r, name, current=r is last))
    if len(same) == 2:
        return out, None
    if len(both) == 2:
        return out, f"The other attempt ran on another device ({_device(both[0][0])}): not plotted."
    missing = names[0] if both[0][1] == names[1] else names[1]
    return out, f"{missing} has no roofline point: only correct, timed runs get one."


def compare(svc: RunService, cell_id: str, picks: list[str], user: str) -> Comparison:
    """Two of `user`'s attempts of one cell, older first; CompareError names what is wrong."""
    older_run, newer_run = _picked(svc, cell_id, picks, user)
    older = _attempt(older_run, number_of(svc, older_run), None)
    newer = _attempt(newer_run, number_of(svc, newer_run), None)
    names = (f"Attempt #{older.number}", f"Attempt #{newer.number}")
    diff, added, removed = _diff(older_run, newer_run, 3, (names[0].lower(), names[1].lower()))
    old_result, new_result = parse_result(older_run), parse_result(newer_run)
    rows = [
        ("Verdict", older.verdict, newer.verdict),
        ("Language", older.backend_title, newer.backend_title),
        ("Launch", launch_text(older_run.launch), launch_text(newer_run.launch)),
    ]
    old_numbers, new_numbers = _numbers(old_result), _numbers(new_result)
    rows += [(label, value, new_numbers[label]) for label, value in old_numbers.items()]
    chart_data, note = _pair_chart(old_result, new_result, names)
    return Comparison(
        cell=cell_id,
        older=older,
        newer=newer,
        rows=rows,
        diff=diff,
        added=added,
        removed=removed,
        verdict=_speed(old_result, new_result, names),
        chart=chart_data,
        chart_note=note,
    )
