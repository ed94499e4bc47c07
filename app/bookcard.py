"""A kernel cell's reference result, drawn once for the built book (site, EPUB, PDF).

The playground's card needs a run and a browser; a printed page has neither. What the book
shows instead is a snapshot of a run that was recorded: the fastest correct, timed run of the
cell's problem in its backend (else in another backend, said so) among the benchmark records
in the results folder (`problem_runs*.json`, `reference_runs*.json`: lists of RunResults, as
`bench/problem_runs.py` writes them); a run that reads above its own roofline is passed over.
Its verdict, time, throughput and share of the roofline are printed as the card prints them,
and its roofline is drawn here as a small SVG (log-log axes, the memory slope, the compute
roof, the point), so every format can show it. A problem with no recorded run says so and
points to the playground.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from kplay.app import format as fmt
from kplay.app.services.problems import backend_title
from kplay.kernels.models import RunResult

RECORD_GLOBS = ("problem_runs*.json", "reference_runs*.json")


@dataclass(frozen=True)
class Snapshot:
    """What a static cell prints about its problem's recorded reference run."""

    backend: str
    same_backend: bool
    device: str
    case: str
    median: str
    throughput: str
    bandwidth: str
    of_roofline: str
    bound: str
    baseline: str | None
    source_file: str
    svg: str


def load_records(results_dir: Path) -> list[tuple[str, RunResult]]:
    """Every run in the results folder's records, with the file it came from; a file that is
    not a list of results is passed over (other benchmarks keep other shapes there)."""
    out: list[tuple[str, RunResult]] = []
    files = sorted({p for g in RECORD_GLOBS for p in Path(results_dir).glob(g)})
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, list):
            continue
        for item in data:
            try:
                out.append((path.name, RunResult.model_validate(item)))
            except ValidationError:
                continue
    return out


def _usable(result: RunResult) -> bool:
    return (
        result.state == "done"
        and result.timing is not None
        and result.timing.timed
        and result.roofline is not None
        and result.roofline.percent_of_roofline is not None
        # Above its roof the run or the ceilings were measured wrong (a loaded machine's
        # calibration, a case that fit in a cache): not a reference to print.
        and result.roofline.percent_of_roofline <= 100.0
    )


class References:
    """The best recorded run per (problem, backend), read once per build."""

    def __init__(self, records: Iterable[tuple[str, RunResult]]) -> None:
        self.best: dict[tuple[str, str], tuple[str, RunResult]] = {}
        for name, result in records:
            if not _usable(result):
                continue
            key = (result.problem, str(result.backend))
            held = self.best.get(key)
            if held is None or _share(result) > _share(held[1]):
                self.best[key] = (name, result)

    @classmethod
    def from_folder(cls, results_dir: Path) -> References:
        return cls(load_records(results_dir))

    def snapshot(self, problem: str, backend: str) -> Snapshot | None:
        found = self.best.get((problem, backend))
        same = found is not None
        if found is None:
            others = [v for (p, _), v in sorted(self.best.items()) if p == problem]
            found = max(others, key=lambda v: _share(v[1])) if others else None
        if found is None:
            return None
        name, result = found
        roof, timing = result.roofline, result.timing
        assert roof is not None and timing is not None
        speedup = roof.speedup_over_baseline
        return Snapshot(
            backend=backend_title(str(result.backend)),
            same_backend=same,
            device=roof.device or "unknown device",
            case=timing.case or "",
            median=fmt.duration_us(timing.median_us),
            throughput=fmt.rate(roof.achieved_flops_per_s, "FLOP/s"),
            bandwidth=fmt.rate(roof.achieved_bytes_per_s, "B/s"),
            of_roofline=fmt.percent(roof.percent_of_roofline),
            bound=str(roof.bound or ""),
            baseline=None if speedup is None else f"{speedup:.2f}x the baseline",
            source_file=name,
            svg=roofline_svg(result),
        )


def _share(result: RunResult) -> float:
    roof = result.roofline
    return float(roof.percent_of_roofline or 0.0) if roof else 0.0


# ------------------------------------------------------------------ the chart

W, H = 360, 220
LEFT, RIGHT, TOP, BOTTOM = 52, 12, 12, 38


def _decades(lo: float, hi: float) -> list[int]:
    return list(range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1))


def _si(exp: int) -> str:
    return f"1e{exp}" if exp < 0 or exp > 2 else f"{10**exp:g}"


def roofline_svg(result: RunResult) -> str:
    """The run's roofline as an SVG element: memory slope and compute roof of the device it
    ran on, the run as a dot with its share of the roof. Sizes in the chart's own units."""
    roof = result.roofline
    assert roof is not None
    bw = float(roof.memory_ceiling_bytes_per_s or 0.0)
    peak = float(roof.compute_ceiling_flops_per_s or 0.0)
    x_run = max(float(roof.intensity_flops_per_byte or 0.0), 1e-3)
    y_run = max(float(roof.achieved_flops_per_s or 0.0), 1.0)
    ridge = peak / bw if bw > 0 and peak > 0 else x_run
    x_lo = 10 ** math.floor(math.log10(min(x_run, ridge) / 4))
    x_hi = 10 ** math.ceil(math.log10(max(x_run, ridge) * 4))
    y_hi = 10 ** math.ceil(math.log10(max(peak, y_run) * 1.5))
    y_lo = 10 ** math.floor(math.log10(min(y_run, bw * x_lo if bw else y_run) / 2))

    def px(x: float) -> float:
        span = math.log10(x_hi) - math.log10(x_lo)
        return LEFT + (math.log10(x) - math.log10(x_lo)) / span * (W - LEFT - RIGHT)

    def py(y: float) -> float:
        span = math.log10(y_hi) - math.log10(y_lo)
        return H - BOTTOM - (math.log10(y) - math.log10(y_lo)) / span * (H - TOP - BOTTOM)

    device = html.escape(str(roof.device))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="roofline-svg" viewBox="0 0 {W} {H}" '
        f'width="{W}" height="{H}" role="img" aria-label="Roofline of {device}">',
        f'<rect x="{LEFT}" y="{TOP}" width="{W - LEFT - RIGHT}" height="{H - TOP - BOTTOM}" '
        'fill="none" stroke="#b9b2a3"/>',
    ]
    for e in _decades(x_lo, x_hi):
        x = px(10.0**e)
        parts.append(
            f'<text x="{x:.1f}" y="{H - BOTTOM + 13}" font-size="9" '
            f'text-anchor="middle" fill="#5b574f">{_si(e)}</text>'
        )
    for e in _decades(y_lo, y_hi):
        y = py(10.0**e)
        parts.append(
            f'<text x="{LEFT - 4}" y="{y + 3:.1f}" font-size="9" '
            f'text-anchor="end" fill="#5b574f">1e{e}</text>'
        )
    parts.append(
        f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 6}" font-size="10" '
        'text-anchor="middle" fill="#2b2a27">arithmetic intensity (FLOP/byte)</text>'
    )
    parts.append(
        f'<text x="12" y="{(TOP + H - BOTTOM) / 2}" font-size="10" text-anchor="middle" '
        f'fill="#2b2a27" transform="rotate(-90 12 {(TOP + H - BOTTOM) / 2})">FLOP/s</text>'
    )
    if bw > 0 and peak > 0:
        x0 = max(x_lo, y_lo / bw)
        roof_pts = [(x0, bw * x0), (ridge, peak), (x_hi, peak)]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in roof_pts)
        parts.append(f'<polyline points="{path}" fill="none" stroke="#1d58b0" stroke-width="2"/>')
        parts.append(
            f'<text x="{px(x_hi) - 4:.1f}" y="{py(peak) - 4:.1f}" font-size="9" '
            f'text-anchor="end" fill="#1d58b0">{html.escape(str(roof.compute_ceiling_name or ""))} '
            f"{html.escape(str(fmt.rate(peak, 'FLOP/s')))}</text>"
        )
    parts.append(f'<circle cx="{px(x_run):.1f}" cy="{py(y_run):.1f}" r="4.5" fill="#c2410c"/>')
    parts.append(
        f'<text x="{px(x_run) + 7:.1f}" y="{py(y_run) + 12:.1f}" font-size="9" '
        f'fill="#9a3412">{html.escape(str(fmt.percent(roof.percent_of_roofline)))} of roof</text>'
    )
    parts.append("</svg>")
    return "".join(parts)
