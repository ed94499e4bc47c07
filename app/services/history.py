"""A cell's earlier attempts: the list under the cell, diffs, and the chart's older points."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from kplay.app import format as fmt
from kplay.app.db.models import Run
from kplay.app.services.cards import VERDICTS, parse_result
from kplay.app.services.problems import backend_title
from kplay.app.services.records import is_final
from kplay.kernels.models import RunResult


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


def _diff(old: Run, new: Run) -> tuple[str | None, int, int]:
    if old.source == new.source:
        return None, 0, 0
    lines = list(
        difflib.unified_diff(
            old.source.splitlines(),
            new.source.splitlines(),
            fromfile=f"attempt {old.id[:8]}",
            tofile=f"attempt {new.id[:8]}",
            lineterm="",
            n=2,
        )
    )
    added = sum(1 for x in lines if x.startswith("+") and not x.startswith("+++"))
    removed = sum(1 for x in lines if x.startswith("-") and not x.startswith("---"))
    return "\n".join(lines), added, removed


def _verdict(run: Run, result: RunResult | None) -> tuple[str, str]:
    if not is_final(run.state):
        return run.state.replace("_", " "), "neutral"
    label, tone = VERDICTS.get(run.state, (run.state, "neutral"))
    if run.state == "done" and result is not None and result.check is None:
        return "Compiled, not run", "neutral"
    return label, tone


def attempts(runs: list[Run], total: int) -> list[Attempt]:
    """`runs` newest first; each is diffed against the attempt before it on the same backend."""
    out = []
    for i, run in enumerate(runs):
        older = next((r for r in runs[i + 1 :] if r.backend == run.backend), None)
        diff, added, removed = _diff(older, run) if older else (None, 0, 0)
        result = parse_result(run) if is_final(run.state) else None
        verdict, tone = _verdict(run, result)
        timing = result.timing if result else None
        roof = result.roofline if result else None
        out.append(
            Attempt(
                run_id=run.id,
                number=total - i,
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
        )
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


def chart(run: Run, history: list[Run], total: int) -> dict[str, Any] | None:
    """The KPlayRoofline.render() input: this run's ceilings, this run and the earlier ones."""
    result = parse_result(run)
    if result is None or result.roofline is None:
        return None
    roof = result.roofline
    numbers = {r.id: total - i for i, r in enumerate(history)}
    points = []
    for other in reversed(history):
        if other.id == run.id or other.created_at > run.created_at:
            continue
        other_result = parse_result(other)
        if other_result and other_result.roofline and other_result.roofline.device == roof.device:
            points.append(_point(other_result, f"attempt #{numbers[other.id]}", current=False))
    label = f"attempt #{numbers[run.id]}" if run.id in numbers else "this run"
    points.append(_point(result, f"{label} (this run)", current=True))
    return {
        "device": roof.device,
        "source": roof.ceilings_source,
        "memory_bytes_per_s": roof.memory_ceiling_bytes_per_s,
        "compute_flops_per_s": roof.compute_ceiling_flops_per_s,
        "compute_name": roof.compute_ceiling_name,
        "points": points,
    }


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
