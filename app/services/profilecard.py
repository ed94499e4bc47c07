"""The profile panel of a run card: Nsight Compute's answer, in the card's words.

A profile run (workers/profiling.py) carries a `ProfileStage`; this turns it into what
the panel shows: speed-of-light bars, the memory chart's numbers, occupancy, the warp
stall reasons in words, the learner's own lines ranked by stall samples (each a button
that moves the editor there) and ncu's advice, with the `.ncu-rep` to download.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kplay.app import format as fmt
from kplay.kernels.models import ProfileStage, StallLine

# ncu's speed-of-light rows, in the order the GUI shows them, with the card's labels.
SOL_LABELS = {
    "Compute (SM) Throughput": "compute (SM)",
    "Memory Throughput": "memory",
    "L1/TEX Cache Throughput": "L1/TEX",
    "L2 Cache Throughput": "L2",
    "DRAM Throughput": "DRAM",
}


@dataclass
class Bar:
    label: str
    percent: float


@dataclass
class ProfileView:
    kernel: str
    launch: str
    duration: str | None
    sol: list[Bar] = field(default_factory=list)
    memory: list[tuple[str, str]] = field(default_factory=list)
    occupancy: list[tuple[str, str]] = field(default_factory=list)
    stalls: list[dict[str, Any]] = field(default_factory=list)
    lines: list[StallLine] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    report_url: str | None = None
    report_size: str | None = None
    seconds: str | None = None


def profile_view(run_id: str, stage: ProfileStage, read_only: bool = False) -> ProfileView:
    regs = stage.registers_per_thread
    view = ProfileView(
        kernel=stage.kernel,
        launch=f"grid {stage.grid} · block {stage.block}"
        + (f" · {regs} registers/thread" if regs else ""),
        duration=fmt.duration_us(stage.duration_ms * 1000) if stage.duration_ms else None,
    )
    for name, label in SOL_LABELS.items():
        if name in stage.speed_of_light:
            view.sol.append(Bar(label, round(min(max(stage.speed_of_light[name], 0.0), 100.0), 1)))
    mem = stage.memory
    if "dram_read_bytes" in mem:
        view.memory.append(("DRAM read", fmt.bytes_(int(mem["dram_read_bytes"]))))
    if "dram_write_bytes" in mem:
        view.memory.append(("DRAM written", fmt.bytes_(int(mem["dram_write_bytes"]))))
    for key, label in (("l1_hit_rate_pct", "L1 hit rate"), ("l2_hit_rate_pct", "L2 hit rate")):
        if key in mem:
            view.memory.append((label, f"{mem[key]:.1f}%"))
    for name, value in stage.occupancy.items():
        shown = f"{value:.1f}%" if name.endswith("Occupancy") else f"{value:g}"
        label = name.replace("Block Limit", "blocks per SM by").replace("Occupancy", "occupancy")
        view.occupancy.append((label[0].lower() + label[1:], shown))
    total = sum(float(s["cycles_per_issue"]) for s in stage.stalls) or 1.0
    view.stalls = [
        {
            "reason": str(s["reason"]).replace("_", " "),
            "words": s["words"],
            "cycles": f"{float(s['cycles_per_issue']):.2f}",
            "share": round(100 * float(s["cycles_per_issue"]) / total, 1),
        }
        for s in stage.stalls[:6]
    ]
    view.lines = list(stage.lines[:8])
    view.advice = [str(a.get("text") or "")[:400] for a in stage.advice[:3] if a.get("text")]
    if stage.report_bytes and not read_only:
        view.report_url = f"/api/v1/runs/{run_id}/profile.ncu-rep"
        view.report_size = fmt.bytes_(stage.report_bytes)
    if stage.seconds:
        view.seconds = f"{stage.seconds:.1f} s"
    return view
