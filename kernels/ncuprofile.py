"""A Nsight Compute report, read into the numbers a learner's profile panel shows.

`ncu -i REPORT --csv` prints three pages this module reads, all plain CSV:

- `--page details`: one row per metric of each section (speed of light, memory workload,
  occupancy, launch statistics, warp state, source counters), and one row per rule, the
  profiler's own advice with its estimated speedup;
- `--page raw`: every collected metric by its counter name, one column each (the memory
  chart's byte counts and hit rates, the stall ratios per issued instruction);
- `--page source --print-source cuda,sass`: per line of CUDA source ("Line No"), the warp
  state samples by stall reason, followed by that line's SASS rows (skipped here). The
  line numbers are those of the compiled file, so the learner's own lines when the kernel
  was compiled from their source with `-lineinfo`.

Pure text work: testable with CSV captured from a real report, no GPU or `ncu` needed.
"""

from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass, field
from typing import Any

from kplay.kernels.backends.lineinfo import learner_file

# Stall reasons as ncu names them (source page columns `stall_<name>`, raw counters
# `smsp__average_warps_issue_stalled_<counter>_per_issue_active.ratio`), in words.
STALLS: dict[str, tuple[str, str]] = {
    "barrier": ("barrier", "waiting at __syncthreads() for the rest of the block"),
    "branch_resolving": ("branch_resolving", "waiting for a branch target to be computed"),
    "dispatch": ("dispatch_stall", "picked, but the dispatcher could not issue it"),
    "drain": ("drain", "waiting for memory stores to drain at exit"),
    "imc": ("imc_miss", "waiting for a constant-cache miss"),
    "lg": ("lg_throttle", "the local/global memory queue is full: too many loads in flight"),
    "long_sb": ("long_scoreboard", "waiting for a global or local memory load to return"),
    "math": ("math_pipe_throttle", "the math pipe it needs is busy"),
    "membar": ("membar", "waiting at a memory barrier"),
    "mio": ("mio_throttle", "the shared-memory/special-function queue is full"),
    "misc": ("misc", "miscellaneous"),
    "no_inst": ("no_instruction", "no instruction fetched yet (instruction cache miss)"),
    "not_selected": ("not_selected", "ready, but another warp was picked"),
    "selected": ("selected", "issuing (not a stall: the warp is doing work)"),
    "short_sb": ("short_scoreboard", "waiting for shared memory or a special function result"),
    "sleep": ("sleeping", "sleeping (nanosleep or a barrier yield)"),
    "tex": ("tex_throttle", "the texture/L1 queue is full"),
    "wait": ("wait", "a fixed-latency dependency (the compiler's wait counts)"),
    "gmma": ("gmma", "waiting for a warpgroup MMA (wgmma) to finish"),
}

SOL_METRICS = [
    "Compute (SM) Throughput",
    "Memory Throughput",
    "L1/TEX Cache Throughput",
    "L2 Cache Throughput",
    "DRAM Throughput",
]
OCCUPANCY_METRICS = [
    "Theoretical Occupancy",
    "Achieved Occupancy",
    "Block Limit Registers",
    "Block Limit Shared Mem",
    "Block Limit Warps",
    "Block Limit SM",
]
MEMORY_COUNTERS = {
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_write_bytes": "dram__bytes_write.sum",
    "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct",
    "l1_hit_rate_pct": "l1tex__t_sector_hit_rate.pct",
}
_BYTES = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12}


class ProfileFormatError(ValueError):
    """The CSV is not what this version of ncu was seen to print."""


@dataclass
class LineStalls:
    line: int
    samples: int
    stalls: dict[str, int] = field(default_factory=dict)  # reason -> samples, top first


@dataclass
class Profile:
    kernel: str
    grid: str
    block: str
    duration_ms: float | None
    sm_ghz: float | None
    speed_of_light: dict[str, float]  # percent of peak, by ncu's names
    memory: dict[str, float]  # bytes and hit rates
    occupancy: dict[str, float]
    registers_per_thread: int | None
    stalls: list[dict[str, Any]]  # {reason, words, cycles_per_issue}, largest first
    lines: list[LineStalls]  # the source lines, most samples first
    advice: list[dict[str, Any]]  # ncu's rules: {section, rule, text, speedup_pct}

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def number(text: str) -> float | None:
    """ncu prints thousands separators and '-' for none."""
    cleaned = text.replace(",", "").strip()
    if not cleaned or cleaned in {"-", "n/a"}:
        return None
    try:
        return float(cleaned)
    except ValueError:
        return None


def _details(text: str) -> tuple[dict[str, str], dict[str, tuple[str, float]], list[dict]]:
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows or "Metric Name" not in rows[0]:
        raise ProfileFormatError("the details page has no 'Metric Name' column")
    first = rows[0]
    launch = {k: first.get(k, "") for k in ("Kernel Name", "Grid Size", "Block Size")}
    metrics: dict[str, tuple[str, float]] = {}
    advice: list[dict] = []
    for row in rows:
        if row["Metric Name"]:
            value = number(row["Metric Value"])
            if value is not None:
                metrics.setdefault(row["Metric Name"], (row["Metric Unit"], value))
        elif row.get("Rule Description"):
            advice.append(
                {
                    "section": row["Section Name"],
                    "rule": row.get("Rule Name", ""),
                    "text": row["Rule Description"].strip(),
                    "speedup_pct": number(row.get("Estimated Speedup", "")),
                }
            )
    advice.sort(key=lambda a: -(a["speedup_pct"] or 0.0))
    return launch, metrics, advice


def _raw(text: str) -> dict[str, tuple[str, float]]:
    rows = list(csv.reader(io.StringIO(text)))
    if len(rows) < 3:
        raise ProfileFormatError("the raw page needs a header, a unit row and one kernel")
    names, units, values = rows[0], rows[1], rows[2]
    out: dict[str, tuple[str, float]] = {}
    for name, unit, value in zip(names, units, values, strict=False):
        parsed = number(value)
        if parsed is not None:
            out[name] = (unit, parsed)
    return out


def learners_file(path: str) -> bool:
    """A file the engine compiled the learner's source from: those of the compiler views
    (`lineinfo.learner_file`), or the program CuPy hands NVRTC (`<hash>.cubin.cu`)."""
    return learner_file(path) or path.strip().endswith(".cubin.cu")


def _source_lines(text: str) -> list[LineStalls]:
    """Lines of the learner's file(s); every file's lines when none of them is recognised."""
    rows = list(csv.reader(io.StringIO(text)))
    if not any(r and r[0] == "Line No" for r in rows):
        raise ProfileFormatError("the source page has no 'Line No' header (use cuda,sass)")
    blocks: list[tuple[str, list[LineStalls]]] = []
    path, header, total, reasons = "", None, 0, {}
    for row in rows:
        if not row:
            continue
        if row[0] == "File Path":
            path, header = (row[1] if len(row) > 1 else ""), None
            blocks.append((path, []))
            continue
        if row[0] == "Line No":
            header = row
            total = header.index("Warp Stall Sampling (All Samples)")
            reasons = {
                i: name[len("stall_") :]
                for i, name in enumerate(header)
                if name.startswith("stall_") and "(" not in name
            }
            if not blocks:
                blocks.append(("", []))
            continue
        if header is None or not row[0].strip().isdigit():
            continue  # a SASS row under its line, or a function name
        samples = int(number(row[total]) or 0)
        if not samples:
            continue
        stalls = {r: int(number(row[i]) or 0) for i, r in reasons.items() if i < len(row)}
        stalls = dict(sorted(((r, n) for r, n in stalls.items() if n), key=lambda x: -x[1]))
        blocks[-1][1].append(LineStalls(int(row[0]), samples, stalls))
    mine = [b for b in blocks if learners_file(b[0])] or blocks
    lines = [entry for _, entries in mine for entry in entries]
    lines.sort(key=lambda s: -s.samples)
    return lines


def _stall_ratios(raw: dict[str, tuple[str, float]]) -> list[dict[str, Any]]:
    out = []
    for reason, (counter, words) in STALLS.items():
        key = f"smsp__average_warps_issue_stalled_{counter}_per_issue_active.ratio"
        if key in raw and raw[key][1] > 0:
            out.append({"reason": reason, "words": words, "cycles_per_issue": raw[key][1]})
    out.sort(key=lambda s: -s["cycles_per_issue"])
    return out


def _memory(raw: dict[str, tuple[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, counter in MEMORY_COUNTERS.items():
        if counter in raw:
            unit, value = raw[counter]
            out[key] = value * _BYTES.get(unit, 1) if key.endswith("_bytes") else value
    return out


def read_profile(details: str, raw: str, source: str) -> Profile:
    """The profile of the first kernel in the three CSV pages of one report."""
    launch, metrics, advice = _details(details)
    counters = _raw(raw)

    def pick(names: list[str]) -> dict[str, float]:
        return {n: metrics[n][1] for n in names if n in metrics}

    duration = metrics.get("Duration")
    scale = {"ns": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0, "s": 1e3}
    duration_ms = duration[1] * scale.get(duration[0], 1.0) if duration else None
    registers = metrics.get("Registers Per Thread")
    return Profile(
        kernel=launch["Kernel Name"],
        grid=launch["Grid Size"],
        block=launch["Block Size"],
        duration_ms=duration_ms,
        sm_ghz=metrics.get("SM Frequency", ("", None))[1],
        speed_of_light=pick(SOL_METRICS),
        memory=_memory(counters),
        occupancy=pick(OCCUPANCY_METRICS),
        registers_per_thread=int(registers[1]) if registers else None,
        stalls=_stall_ratios(counters),
        lines=_source_lines(source),
        advice=advice,
    )


def line_reasons(line: Any, top: int | None = 3) -> str:
    """A line's largest stall reasons with their shares of its samples: "barrier 61%, ...".
    `line`: a LineStalls, or the result's StallLine (both have `samples` and `stalls`)."""
    items = list(line.stalls.items())[:top]
    words = [f"{r.replace('_', ' ')} {100 * n / line.samples:.0f}%" for r, n in items]
    return ", ".join(words) if line.samples else ""


def stall_table(profile: Profile, source: str, top: int = 8) -> list[str]:
    """The learner's lines ranked by stall samples, as text: `line  share  reasons  code`."""
    code = source.splitlines()
    total = sum(s.samples for s in profile.lines) or 1
    out = []
    for entry in profile.lines[:top]:
        text = code[entry.line - 1].strip() if 0 < entry.line <= len(code) else ""
        reasons = line_reasons(entry, top=None)
        out.append(
            f"{entry.line:>5}  {100 * entry.samples / total:5.1f}%  {reasons[:60]:<60}  {text}"
        )
    return out
