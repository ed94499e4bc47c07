"""The Hopper bf16 GEMM ladder of Part IV, every rung against cuBLAS in one run.

Each `gemm_bf16_h<N>_*.cu` solution of the `gemm_bf16` problem (plain CUDA C++ with inline
PTX: TMA, mbarriers, wgmma, setmaxnreg, clusters) goes the learner's way through the
engine (kernels.evaluate, as bench/gemm_ladder.py does): compiled for sm_90a, checked on
every test case, then timed on the 4096^3 and 8192^3 benchmark cases by the engine's own
timer (L2 flushed before every rep). The baseline is the problem's own, timed by the
engine in the same run on the same inputs: cuBLAS through CuPy, cublasGemmEx with bf16
inputs, an fp32 output and fp32 compute (the kernels' exact contract). cuBLAS is also
timed alone once per size (rows `cublas@N`), which stands in for a rung's baseline when
the engine gave none.

Every rung runs in a child process with a time limit, so that a rung that faults (a CUDA
error poisons its process) or hangs (a wrong phase on an mbarrier) is reported on its
row and the others still run.

    python bench/hopper_ladder.py --compile-only          # any machine with nvcc
    python bench/hopper_ladder.py --json out.json         # on an H100/H200
    python bench/hopper_ladder.py --rungs h1,h4 --sizes 4096 --cap 1

The table: rung, state, median µs, TFLOP/s, % of cuBLAS, and whether the SASS holds
HGMMA (wgmma) and UTMALDG (TMA loads), with the other Hopper badges it shows.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SOLUTIONS = ROOT / "kernels" / "problems" / "gemm_bf16" / "solutions" / "correct"
PROBLEM = "gemm_bf16"
SIZES = (4096, 8192)
# The badges every rung must show, and the ones worth a column.
REQUIRED = ("HGMMA", "UTMALDG")
SHOWN = ("HGMMA", "UTMALDG", "setmaxnreg", "cluster barrier", "DSMEM", "local memory")
CHILD_TIMEOUT_S = 300


def rung_files() -> list[tuple[str, Path]]:
    """('h1', path) for every rung, in order."""
    found = []
    for path in sorted(SOLUTIONS.glob("gemm_bf16_h[0-9]*.cu")):
        found.append((path.stem.removeprefix("gemm_bf16_").split("_", 1)[0], path))
    return found


def badges(sass: str | None) -> list[str]:
    """The SASS badges of a listing (of the whole listing when it was cut)."""
    from kplay.kernels.sassfeatures import noted_features, sass_features

    if not sass:
        return []
    uses = noted_features(sass)
    if uses is None:
        uses = sass_features(sass)
    return [u.feature.badge for u in uses]


# ------------------------------------------------------------------ one rung


def _compile_row(path: Path) -> dict[str, Any]:
    from kplay.kernels.evaluate import evaluate
    from kplay.kernels.models import RunJob

    job = RunJob(problem=PROBLEM, backend="cuda", source=path.read_text(), mode="compile")
    result = evaluate(job)
    row: dict[str, Any] = {"state": result.state.value}
    comp = result.compile
    if comp is None or not comp.ok:
        row["message"] = result.message or "no compile result"
        if comp is not None:
            errors = [d.message for d in comp.diagnostics if d.severity == "error"][:3]
            row["errors"] = errors
        return row
    row["badges"] = badges(comp.sass)
    if comp.resources:
        res = comp.resources[0]
        row.update(registers=res.registers, spill_bytes=res.spill_stores_bytes,
                   static_smem=res.shared_bytes, arch=res.arch)  # fmt: skip
    missing = [b for b in REQUIRED if b not in row["badges"]]
    if missing:
        row["message"] = "SASS lacks " + ", ".join(missing)
    return row


def _measure_row(path: Path, size: int, cap_s: float) -> dict[str, Any]:
    from bench.gemm_ladder import _row_from_result
    from kplay.kernels.evaluate import evaluate
    from kplay.kernels.models import RunJob

    name = f"{size}x{size}x{size}"
    job = RunJob(problem=PROBLEM, backend="cuda", source=path.read_text(), mode="full",
                 timing_cap_s=cap_s, benchmark=name)  # fmt: skip
    result = evaluate(job)
    row = _row_from_result(result)
    row["size"] = size
    row["badges"] = badges(result.compile.sass if result.compile else None)
    if result.check is not None and not result.check.ok:
        row.setdefault("message", result.message)
    return row


def _baseline_row(size: int, cap_s: float) -> dict[str, Any]:
    """cuBLAS alone on the size's benchmark case (bench/gemm_ladder.py's timer helper)."""
    from bench.gemm_ladder import _time_library

    row = _time_library(PROBLEM, cap_s, f"{size}x{size}x{size}")
    row["size"] = size
    return row


def child(path: Path | None, size: int | None, cap_s: float) -> int:
    """Run one rung (one size, or compile only), or cuBLAS alone when no rung is given, and
    print its row as the last line."""
    try:
        if path is None:
            row = _baseline_row(int(size or 0), cap_s)
        else:
            row = _compile_row(path) if size is None else _measure_row(path, size, cap_s)
    except Exception as exc:  # noqa: BLE001 - reported on the rung's row, never fatal
        row = {"state": "error", "message": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(row))
    return 0


def _run_child(
    path: Path | None, size: int | None, cap_s: float, timeout_s: float
) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--cap", str(cap_s)]
    cmd += ["--child", str(path)] if path is not None else ["--child-baseline"]
    if size is not None:
        cmd += ["--child-size", str(size)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"state": "timeout", "message": f"no answer within {timeout_s:.0f} s (a hang?)"}
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
        return {"state": "error", "message": f"exit {out.returncode}: " + " | ".join(tail)}
    return json.loads(lines[-1])


# ------------------------------------------------------------------ the ladder


def _finish(row: dict[str, Any], size: int, cublas_us: float | None) -> None:
    """TFLOP/s and % of cuBLAS: the engine's same-run baseline, else cuBLAS timed alone."""
    us = row.get("median_us")
    if not us:
        return
    row["tflops"] = round(2.0 * size**3 / (us * 1e-6) / 1e12, 1)
    base = row.get("engine_baseline_us") or cublas_us
    if base:
        row["cublas_us"] = round(base, 1)
        row["cublas_tflops"] = round(2.0 * size**3 / (base * 1e-6) / 1e12, 1)
        row["percent_of_cublas"] = round(100.0 * base / us, 1)
    row["median_us"] = round(us, 1)


def run(rungs: list[tuple[str, Path]], sizes: list[int] | None, cap_s: float,
        timeout_s: float, log: Any = print) -> dict[str, Any]:  # fmt: skip
    rows: dict[str, Any] = {}
    cublas: dict[int, float] = {}
    for size in sizes or []:
        log(f"cuBLAS @ {size}^3 ...")
        row = _run_child(None, size, cap_s, timeout_s)
        if row.get("median_us"):
            cublas[size] = row["median_us"]
        row["badges"] = []
        _finish(row, size, None)
        rows[f"cublas@{size}"] = row
    for name, path in rungs:
        if sizes is None:
            log(f"{name}: compiling {path.name} ...")
            rows[name] = _run_child(path, None, cap_s, timeout_s)
            continue
        for size in sizes:
            log(f"{name} @ {size}^3: {path.name} ...")
            row = _run_child(path, size, cap_s, timeout_s)
            _finish(row, size, cublas.get(size))
            rows[f"{name}@{size}"] = row
            if row.get("state") == "timeout":  # a hang at one size hangs at the next
                break
    return rows


def table(rows: dict[str, Any], compile_only: bool) -> str:
    def yes(row: dict[str, Any], badge: str) -> str:
        if "badges" not in row or row.get("size") and not row["badges"]:
            return "-"  # cuBLAS, or a rung that never compiled
        return "yes" if badge in row["badges"] else "no"

    if compile_only:
        head = (
            "| rung | state | registers | HGMMA | UTMALDG | other badges |"
            "\n|---|---|---|---|---|---|"
        )
    else:
        head = (
            "| rung | state | µs | TFLOP/s | cuBLAS µs | % of cuBLAS | HGMMA | UTMALDG |"
            "\n|---|---|---|---|---|---|---|---|"
        )
    lines = [head]
    for name, row in rows.items():
        others = ", ".join(b for b in row.get("badges", []) if b not in REQUIRED) or "-"
        if compile_only:
            cells = [row.get("state"), row.get("registers", "-"), yes(row, "HGMMA"),
                     yes(row, "UTMALDG"), others]  # fmt: skip
        else:
            cells = [row.get("state"), row.get("median_us", "-"), row.get("tflops", "-"),
                     row.get("cublas_us", "-"), row.get("percent_of_cublas", "-"),
                     yes(row, "HGMMA"), yes(row, "UTMALDG")]  # fmt: skip
        lines.append(f"| {name} | " + " | ".join(str(c) for c in cells) + " |")
        if row.get("message"):
            lines.append(f"|  | {str(row['message'])[:200]} |")
    return "\n".join(lines)


def failures(rows: dict[str, Any], compile_only: bool) -> list[str]:
    """Rungs that did not end as they should: compiled with both badges, or done."""
    bad = []
    for name, row in rows.items():
        if name.startswith("cublas@"):
            bad += [] if row.get("median_us") else [name]
            continue
        want = ("compiled", "done") if compile_only else ("done",)
        if row.get("state") not in want or any(b not in row.get("badges", []) for b in REQUIRED):
            bad.append(name)
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compile-only", action="store_true",
                        help="compile every rung through the engine; show badges")  # fmt: skip
    parser.add_argument("--json", type=Path, help="write the rows here")
    parser.add_argument("--rungs", help="comma-separated rungs (h1,h4); default all")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="comma-separated square sizes from 4096, 8192")  # fmt: skip
    parser.add_argument("--cap", type=float, default=1.0, help="timing seconds per kernel")
    parser.add_argument("--timeout", type=float, default=CHILD_TIMEOUT_S,
                        help="seconds one rung may take before it is reported as hung")  # fmt: skip
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child-size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-baseline", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None or args.child_baseline:
        return child(args.child, args.child_size, args.cap)

    rungs = rung_files()
    if args.rungs:
        wanted = set(args.rungs.split(","))
        rungs = [(n, p) for n, p in rungs if n in wanted]
    if not rungs:
        print("hopper_ladder: no rung matched", file=sys.stderr)
        return 2
    sizes: list[int] | None = None
    if not args.compile_only:
        from kplay.kernels.hardware import has_cuda_gpu

        if not has_cuda_gpu():
            print("hopper_ladder: no CUDA GPU here; use --compile-only", file=sys.stderr)
            return 2
        sizes = [int(s) for s in args.sizes.split(",")]
        unknown = [s for s in sizes if s not in SIZES]
        if unknown:
            print(f"hopper_ladder: no benchmark case for {unknown}", file=sys.stderr)
            return 2
    rows = run(rungs, sizes, args.cap, args.timeout,
               log=lambda s: print(s, file=sys.stderr, flush=True))  # fmt: skip
    print(table(rows, args.compile_only))
    if args.json is not None:
        from bench.benchlib import commit

        meta: dict[str, Any] = {
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "commit": commit(),
            "compile_only": args.compile_only,
            "baseline": "cuBLAS cublasGemmEx via CuPy: bf16 in, fp32 out, fp32 compute "
            "(the problem's baseline, timed by the engine in the same run)",
            "host": os.uname().nodename,
        }
        if not args.compile_only:
            from kplay.kernels.sysinfo import gpu_facts

            meta.update(gpu_facts())
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    bad = failures(rows, args.compile_only)
    if bad:
        print(f"hopper_ladder: {len(bad)} rung(s) failed: {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
