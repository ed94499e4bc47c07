"""Part III's row kernels, measured: softmax, LayerNorm and bias + GELU on one GPU.

Every kernel goes through the engine (kernels.evaluate, mode "full": checked on every test
case, timed on the problem's first benchmark case, re-checked), as a reader's Run button
does. In the same run the script times a device-to-device copy (the yardstick of
bench/part1.py) and torch's own kernels for the same computations on the same shapes:
torch.softmax, torch.nn.functional.layer_norm and gelu(x + b), the last unfused as most
code writes it. Each row reports its time, the bytes a perfect kernel moves (the problem's
`bytes` formula) divided by that time, and that rate as a percent of the calibrated copy
roof (the roofline the engine places the run on) and of the copy measured in this run.
The floor column is the time those bytes take at the calibrated copy roof: a prediction,
not a measurement.

    python bench/part3_rows.py [--cap 1.0] [--out bench/results/part3_rows.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results"

from bench.part1_common import _r  # noqa: E402

# (row name, problem, correct solution file, backend)
KERNEL_ROWS: tuple[tuple[str, str, str, str], ...] = (
    ("softmax_one_read_cuda", "softmax", "softmax_one_read.cu", "cuda"),
    ("softmax_online_cuda", "softmax", "softmax_online.cu", "cuda"),
    ("softmax_online_push_cuda", "softmax", "softmax_online_push.cu", "cuda"),
    ("softmax_one_read_triton", "softmax", "softmax_one_read.triton.py", "triton"),
    ("softmax_online_triton", "softmax", "softmax_online.triton.py", "triton"),
    ("layernorm_cuda", "layernorm", "layernorm.cu", "cuda"),
    ("layernorm_triton", "layernorm", "layernorm.triton.py", "triton"),
    ("bias_gelu_cuda", "bias_gelu", "bias_gelu.cu", "cuda"),
    ("bias_gelu_triton", "bias_gelu", "bias_gelu.triton.py", "triton"),
)
# torch's kernel for each problem: (row name, what it computes)
TORCH_ROWS: dict[str, tuple[str, str]] = {
    "softmax": ("torch_softmax", "torch.softmax(x, dim=1)"),
    "layernorm": ("torch_layer_norm", "F.layer_norm(x, (cols,), gamma, beta, 1e-5)"),
    "bias_gelu": ("torch_gelu_x_plus_b", "F.gelu(x + b) (two kernels)"),
}
COLUMNS = (
    "row",
    "backend",
    "case",
    "state",
    "median_us",
    "iqr_us",
    "gbs",
    "percent_of_roofline",
    "percent_of_copy",
    "floor_us",
)
HEADERS = (
    "row",
    "backend",
    "case",
    "state",
    "median (µs)",
    "IQR (µs)",
    "GB/s",
    "% of calibrated copy roof",
    "% of copy in this run",
    "floor at the roof (µs, predicted)",
)


def benchmark_case(problem: str, backend: str = "cuda") -> tuple[str, dict[str, Any], int]:
    """The case the engine times for this problem and backend: name, params and bytes."""
    from kplay.kernels import formula
    from kplay.kernels.catalog import get_problem

    spec = get_problem(problem)
    for case in spec.benchmarks:
        if not case.backends or backend in case.backends:
            return case.name, dict(case.params), int(formula.evaluate(spec.bytes, case.params))
    raise LookupError(f"{problem}: no benchmark case for {backend}")


def floor_us(nbytes: float, bytes_per_s: float | None) -> float | None:
    """The time `nbytes` take at `bytes_per_s`: a prediction, the floor of a perfect kernel."""
    if not bytes_per_s or bytes_per_s <= 0:
        return None
    return nbytes / bytes_per_s * 1e6


def percent(nbytes: float, median_us: float | None, bytes_per_s: float | None) -> float | None:
    if not median_us or not bytes_per_s:
        return None
    return 100.0 * nbytes / (median_us * 1e-6) / bytes_per_s


def roof_of(results: list[Any]) -> tuple[float | None, str | None]:
    """The memory roof of the first result the engine placed on a roofline."""
    for result in results:
        rl = result.roofline
        if rl is not None and rl.memory_ceiling_bytes_per_s:
            return float(rl.memory_ceiling_bytes_per_s), rl.ceilings_source
    return None, None


def kernel_row(result: Any, copy_bps: float | None, roof_bps: float | None) -> dict[str, Any]:
    """One engine result as a table row (the figures stay None when it did not time)."""
    row: dict[str, Any] = {"state": result.state.value, "backend": result.backend}
    t, rl = result.timing, result.roofline
    if result.state.value != "done" or t is None or not t.timed or rl is None:
        row["message"] = (result.message or "")[:200]
        return row
    row.update(
        case=t.case,
        median_us=_r(t.median_us),
        iqr_us=_r(t.iqr_us),
        reps=t.reps,
        bytes=rl.bytes,
        gbs=_r(rl.achieved_bytes_per_s / 1e9, 0),
        percent_of_roofline=_r(rl.percent_of_roofline),
        percent_of_copy=_r(percent(rl.bytes, t.median_us, copy_bps)),
        floor_us=_r(floor_us(rl.bytes, roof_bps)),
        ceilings_source=rl.ceilings_source,
        baseline_us=_r(rl.baseline_median_us),
    )
    res = result.compile.resources if result.compile else []
    if res and res[0].registers is not None:
        row.update(registers=res[0].registers, spill_bytes=res[0].spill_stores_bytes)
    return row


def timed_row(
    backend: str,
    case: str,
    nbytes: int,
    median_us: float | None,
    iqr_us: float | None,
    copy_bps: float | None,
    roof_bps: float | None,
) -> dict[str, Any]:
    """A row for a kernel timed outside the engine (torch), on the problem's own bytes."""
    if not median_us:
        return {"state": "failed", "backend": backend, "case": case}
    return {
        "state": "done",
        "backend": backend,
        "case": case,
        "median_us": _r(median_us),
        "iqr_us": _r(iqr_us),
        "bytes": nbytes,
        "gbs": _r(nbytes / median_us / 1e3, 0),
        "percent_of_roofline": _r(percent(nbytes, median_us, roof_bps)),
        "percent_of_copy": _r(percent(nbytes, median_us, copy_bps)),
        "floor_us": _r(floor_us(nbytes, roof_bps)),
    }


def markdown_table(rows: dict[str, Any]) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|---" * len(HEADERS) + "|"]
    for name, row in rows.items():
        if name in ("meta", "copy", "ceilings") or not isinstance(row, dict):
            continue
        cells = [name] + ["-" if row.get(k) is None else str(row[k]) for k in COLUMNS[1:]]
        line = "| " + " | ".join(cells) + " |"
        if row.get("message"):
            line += " " + str(row["message"]).replace("|", "/").replace("\n", " ")
        lines.append(line)
    return "\n".join(lines)


# ------------------------------------------------------------------ GPU


def _torch_launch(problem: str, params: dict[str, Any]) -> Callable[[], Any]:
    import torch
    import torch.nn.functional as F

    rows, cols = int(params["rows"]), int(params["cols"])
    dev = "cuda"
    x = torch.randn(rows, cols, device=dev, dtype=torch.float32)
    if problem == "softmax":
        return lambda: torch.softmax(x, dim=1)
    if problem == "layernorm":
        gamma = torch.rand(cols, device=dev) + 0.5
        beta = torch.rand(cols, device=dev) - 0.5
        return lambda: F.layer_norm(x, (cols,), gamma, beta, 1e-5)
    if problem == "bias_gelu":
        b = torch.rand(cols, device=dev) * 2 - 1
        return lambda: F.gelu(x + b)
    raise KeyError(problem)


def time_torch(problem: str, params: dict[str, Any], cap_s: float) -> tuple[float, float]:
    """torch's kernel for the problem, timed by the engine's GPU timer (L2 flushed per rep).

    torch and CuPy both launch on the legacy default stream here, so the timer's events
    bracket torch's kernels."""
    import torch

    from kplay.kernels import timing

    launch = _torch_launch(problem, params)
    launch()
    torch.cuda.synchronize()
    stage = timing.time_gpu(launch, cap_s=cap_s)
    return float(stage.median_us or 0.0), float(stage.iqr_us or 0.0)


def measure(cap_s: float, log: Callable[[str], None]) -> dict[str, Any]:
    from bench.part1 import copy_bandwidth
    from bench.part1_common import _commit, _evaluate, _today
    from kplay.kernels import roofline
    from kplay.kernels.sysinfo import gpu_facts

    facts = gpu_facts()
    log("copy bandwidth ...")
    copy_bps = copy_bandwidth()
    results = []
    for name, problem, file, backend in KERNEL_ROWS:
        log(f"{name} ...")
        results.append((name, _evaluate(problem, backend, file, cap_s)))
    # The roof the engine placed the runs on (calibrated on first need, so read it after
    # them), else the device's cached ceilings.
    roof_bps, source = roof_of([r for _n, r in results])
    if roof_bps is None:
        ceilings = roofline.ceilings_for(facts["device"])
        if ceilings is not None:
            roof_bps, source = ceilings.copy_bytes_per_s, ceilings.source
    rows: dict[str, Any] = {"copy": {"gbs": _r(copy_bps / 1e9, 0)}}
    rows["ceilings"] = {"source": source, "copy_gbs": _r((roof_bps or 0) / 1e9, 0)}
    for name, result in results:
        rows[name] = kernel_row(result, copy_bps, roof_bps)
    for problem, (name, what) in TORCH_ROWS.items():
        log(f"{name} ...")
        case, params, nbytes = benchmark_case(problem)
        try:
            med, iqr = time_torch(problem, params, cap_s)
        except Exception as exc:  # noqa: BLE001 - reported in the table, the run goes on
            rows[name] = {"state": "failed", "backend": "torch", "message": repr(exc)[:200]}
            continue
        rows[name] = timed_row("torch", case, nbytes, med, iqr, copy_bps, roof_bps)
        rows[name]["computes"] = what
    rows["meta"] = {
        "device": facts["device"],
        "date": _today(),
        "commit": _commit(),
        "cuda": facts.get("cuda"),
        "driver": facts.get("driver"),
        "command": "python bench/part3_rows.py",
    }
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cap", type=float, default=1.0, help="timing cap per run, seconds")
    parser.add_argument("--out", type=Path, default=None, help="results JSON to write")
    args = parser.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    from kplay.kernels.hardware import has_cuda_gpu

    if not has_cuda_gpu():
        log("part3_rows: no CUDA GPU here; nothing measured")
        return 2
    rows = measure(args.cap, log)
    out = args.out or RESULTS / "part3_rows.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2) + "\n")
    print(json.dumps({k: rows[k] for k in ("meta", "ceilings", "copy") if k in rows}, indent=2))
    print(markdown_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
