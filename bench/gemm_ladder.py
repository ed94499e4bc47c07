"""The GEMM ladder of Part II, measured in one run: every step against cuBLAS.

Each `gemm_NN_*.cu` solution of the `sgemm` problem goes through the engine
(kernels.evaluate: checked on every test case, then timed on the 4096^3 benchmark case
by the engine's own timer, L2 flushed before every rep); cuBLAS SGEMM is timed by the
same timer on the same case, with TF32 off. The tensor-core step does the same for the
`hgemm_wmma` solutions against cuBLAS with fp16 inputs and fp32 output.

Writes bench/results/gemm_ladder.json (one row per step, the fields the book's
`[[bench:gemm_ladder.<row>.<field>]]` placeholders read), redraws
static/book/gemm_ladder.svg from it, and prints a Markdown table.

    python bench/gemm_ladder.py                  # measure (needs a GPU), write, draw
    python bench/gemm_ladder.py --redraw         # redraw the chart from the JSON only
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# cuBLAS must not round float32 inputs to TF32: CuPy enables it only when CUPY_TF32=1,
# and NVIDIA_TF32_OVERRIDE=0 forbids it library-wide. Both are read at import/init time.
os.environ["CUPY_TF32"] = "0"
os.environ["NVIDIA_TF32_OVERRIDE"] = "0"

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results" / "gemm_ladder.json"
CHART = ROOT / "static" / "book" / "gemm_ladder.svg"
SGEMM_DIR = ROOT / "kernels" / "problems" / "sgemm" / "solutions" / "correct"
WMMA_DIR = ROOT / "kernels" / "problems" / "hgemm_wmma" / "solutions" / "correct"
# Tensor-core rows: (row name, solution file). The first is the chapter's kernel.
WMMA_ROWS = (("08_wmma", "hgemm_wmma_pipelined.cu"), ("08_wmma_naive", "hgemm_wmma_naive.cu"))
LABELS = {
    "01_naive": "1 naive",
    "02_coalesced": "2 coalesced",
    "03_smem_tiling": "3 shared-memory tiles",
    "04_blocktile_1d": "4 1-D blocktiling",
    "05_blocktile_2d": "5 2-D blocktiling",
    "06_vectorized": "6 float4 loads",
    "07_warptile": "7 warptiling",
    "cublas": "cuBLAS SGEMM",
    "08_wmma_naive": "8a WMMA, one fragment",
    "08_wmma": "8b WMMA, pipelined",
    "cublas_fp16": "cuBLAS fp16 → fp32",
}


def ladder_files() -> list[tuple[str, Path]]:
    """('01_naive', path) for every numbered step, in order."""
    return [(p.stem.removeprefix("gemm_"), p) for p in sorted(SGEMM_DIR.glob("gemm_[0-9]*.cu"))]


# ------------------------------------------------------------------ measuring


def _commit() -> str:
    from bench.benchlib import commit

    return commit()


def _evaluate(problem: str, source: str, cap_s: float) -> Any:
    from kplay.kernels.evaluate import evaluate
    from kplay.kernels.models import RunJob

    return evaluate(RunJob(problem=problem, backend="cuda", source=source, timing_cap_s=cap_s))


def _row_from_result(result: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"state": result.state.value}
    if result.state.value != "done" or result.timing is None or not result.timing.timed:
        row["message"] = result.message
        return row
    t, rl = result.timing, result.roofline
    row.update(median_us=t.median_us, iqr_us=t.iqr_us, reps=t.reps)
    if rl is not None:
        row.update(
            flops_per_s=rl.achieved_flops_per_s,
            percent_of_roofline=rl.percent_of_roofline,
            ceiling=rl.compute_ceiling_name,
            ceilings_source=rl.ceilings_source,
            engine_baseline_us=rl.baseline_median_us,
        )
    res = result.compile.resources if result.compile else []
    if res:
        row.update(registers=res[0].registers, spill_bytes=res[0].spill_stores_bytes)
    return row


def _time_library(problem_slug: str, cap_s: float, benchmark: str | None = None) -> dict[str, Any]:
    """The problem's library baseline on its benchmark case (or the one named), through the
    engine's timer."""
    import cupy

    from kplay.kernels import formula, timing
    from kplay.kernels.arrays import ArrayOps
    from kplay.kernels.backends.base import ArrayKind
    from kplay.kernels.catalog import get_problem
    from kplay.kernels.check import prepare
    from kplay.kernels.perf import benchmark_case

    problem = get_problem(problem_slug)
    case = benchmark_case(problem, "cuda", benchmark)
    prepared = prepare(problem, case, ArrayOps(ArrayKind.cupy), case.seed)
    params = dict(case.params)
    stage = timing.time_gpu(
        lambda: problem.reference.baseline(prepared.device, params, cupy), cap_s=cap_s
    )
    flops = float(formula.evaluate(problem.flops, params))
    return {
        "state": "done",
        "median_us": stage.median_us,
        "iqr_us": stage.iqr_us,
        "reps": stage.reps,
        "flops_per_s": flops / (stage.median_us * 1e-6),
    }


def _finish(rows: dict[str, dict[str, Any]], meta: dict[str, Any]) -> None:
    """Derived fields, rounded for display; device/date/commit on every row."""
    groups = {"cublas": [n for n, _ in ladder_files()], "cublas_fp16": [n for n, _ in WMMA_ROWS]}
    for ref, members in groups.items():
        base = rows.get(ref, {}).get("median_us")
        for name in [*members, ref]:
            row = rows.get(name)
            if row is None or not row.get("median_us"):
                continue
            if base:
                row["percent_of_cublas"] = round(100.0 * base / row["median_us"], 1)
            row["gflops"] = round(row["flops_per_s"] / 1e9)
            row["tflops"] = round(row["flops_per_s"] / 1e12, 2)
            row["median_us"] = round(row["median_us"], 1)
            for key in ("iqr_us", "engine_baseline_us"):
                if row.get(key) is not None:
                    row[key] = round(row[key], 1)
            if row.get("percent_of_roofline") is not None:
                row["percent_of_roofline"] = round(row["percent_of_roofline"], 1)
    for row in rows.values():
        row.update(device=meta["device"], date=meta["date"], commit=meta["commit"])


def measure(cap_s: float, log: Callable[[str], None] = print) -> dict[str, dict[str, Any]]:
    from kplay.kernels.sysinfo import gpu_facts

    facts = gpu_facts()
    meta = {
        "device": facts["device"],
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"),
        "commit": _commit(),
        "cuda": facts["cuda"],
        "driver": facts["driver"],
        "command": "python bench/gemm_ladder.py",
        "case": "M = N = K = 4096",
    }
    rows: dict[str, dict[str, Any]] = {}
    for name, path in ladder_files():
        log(f"sgemm {name} ...")
        rows[name] = _row_from_result(_evaluate("sgemm", path.read_text(), cap_s))
    log("cuBLAS SGEMM ...")
    rows["cublas"] = _time_library("sgemm", cap_s)
    for name, file in WMMA_ROWS:
        log(f"hgemm_wmma {name} ...")
        rows[name] = _row_from_result(_evaluate("hgemm_wmma", (WMMA_DIR / file).read_text(), cap_s))
    log("cuBLAS fp16 -> fp32 ...")
    rows["cublas_fp16"] = _time_library("hgemm_wmma", cap_s)
    _finish(rows, meta)
    rows["meta"] = meta
    return rows


# ------------------------------------------------------------------ reporting


def markdown_table(rows: dict[str, dict[str, Any]]) -> str:
    def cell(row: dict[str, Any], key: str) -> str:
        value = row.get(key)
        return "-" if value is None else str(value)

    lines = [
        "| step | state | median (µs) | GFLOP/s | % of cuBLAS | % of roofline | registers |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in LABELS:
        row = rows.get(name)
        if row is None:
            continue
        keys = ("state", "median_us", "gflops", "percent_of_cublas", "percent_of_roofline")
        values = [cell(row, k) for k in keys] + [cell(row, "registers")]
        lines.append(f"| {LABELS[name]} | " + " | ".join(values) + " |")
        if row.get("message"):
            lines.append(f"|  | {row['message'][:160]} |||||")
    return "\n".join(lines)


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def chart_svg(rows: dict[str, dict[str, Any]]) -> str:
    """Horizontal bars: each step's speed as a percent of its cuBLAS (fp32 or fp16).

    Drawn with currentColor on a transparent background so that it reads in both
    themes; bars without a measurement are drawn as empty outlines.
    """
    groups = [
        ("FP32 (FFMA) vs cuBLAS SGEMM", [n for n, _ in ladder_files()] + ["cublas"]),
        ("FP16 tensor cores vs cuBLAS fp16", ["08_wmma_naive", "08_wmma", "cublas_fp16"]),
    ]
    left, width, bar_h, gap, top = 190, 340, 18, 6, 44
    scale = width / 100.0
    y = top
    parts: list[str] = []
    for title, names in groups:
        parts.append(f'<text x="8" y="{y + 12}" font-weight="600">{_esc(title)}</text>')
        y += 22
        for name in names:
            row = rows.get(name, {})
            pct = row.get("percent_of_cublas")
            label = LABELS.get(name, name)
            parts.append(
                f'<text x="{left - 8}" y="{y + 13}" text-anchor="end">{_esc(label)}</text>'
            )
            if pct is None:
                parts.append(
                    f'<rect x="{left}" y="{y}" width="{width}" height="{bar_h}" fill="none" '
                    f'stroke="currentColor" stroke-opacity="0.3" stroke-dasharray="3 3"/>'
                    f'<text x="{left + 6}" y="{y + 13}" opacity="0.7">not yet measured</text>'
                )
            else:
                w = max(1.0, min(pct, 110.0) * scale)
                opacity = "0.9" if name.startswith("cublas") else "0.55"
                tf = row.get("tflops")
                text = f"{pct:g}%" + (f" · {tf:.1f} TFLOP/s" if tf is not None else "")
                parts.append(
                    f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" '
                    f'fill="currentColor" fill-opacity="{opacity}"/>'
                    f'<text x="{left + w + 6:.1f}" y="{y + 13}">{_esc(text)}</text>'
                )
            y += bar_h + gap
        y += 14
    height = y + 24
    meta = rows.get("meta", {})
    source = (
        f"{meta.get('device', '')}, {meta.get('case', '')}, {meta.get('date', '')}"
        if meta
        else "no measurement yet: run python bench/gemm_ladder.py on a GPU"
    )
    axis = "".join(
        f'<line x1="{left + p * scale:.1f}" y1="{top - 6}" x2="{left + p * scale:.1f}" '
        f'y2="{y - 14}" stroke="currentColor" stroke-opacity="0.15"/>'
        f'<text x="{left + p * scale:.1f}" y="{top - 10}" text-anchor="middle" '
        f'font-size="11" opacity="0.7">{p}%</text>'
        for p in (0, 25, 50, 75, 100)
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 720 {height}" '
        f'width="720" height="{height}" role="img" '
        f'aria-label="The GEMM ladder as a percent of cuBLAS" '
        f'font-family="system-ui, sans-serif" font-size="12" fill="currentColor">\n'
        f"<title>The GEMM ladder: each kernel's speed as a percent of cuBLAS</title>\n"
        f'<text x="8" y="16" font-size="13" font-weight="600">'
        f"Percent of cuBLAS on the same GPU (longer is faster)</text>\n"
        f"{axis}\n" + "\n".join(parts) + "\n"
        f'<text x="8" y="{height - 8}" font-size="11" opacity="0.7">{_esc(source)}</text>\n'
        "</svg>\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS, help="results JSON to write")
    parser.add_argument("--svg", type=Path, default=CHART, help="chart to redraw")
    parser.add_argument("--cap", type=float, default=2.0, help="timing cap per kernel, seconds")
    parser.add_argument("--redraw", action="store_true", help="only redraw from --out")
    args = parser.parse_args(argv)
    if args.redraw:
        rows = json.loads(args.out.read_text()) if args.out.is_file() else {}
    else:
        from kplay.kernels.hardware import has_cuda_gpu

        if not has_cuda_gpu():
            print("gemm_ladder: no CUDA GPU here; nothing measured", file=sys.stderr)
            return 2
        rows = measure(args.cap, log=lambda s: print(s, file=sys.stderr, flush=True))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=2) + "\n")
    args.svg.parent.mkdir(parents=True, exist_ok=True)
    args.svg.write_text(chart_svg(rows))
    print(markdown_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
