"""Part I of the book, measured: the CPU kernels on this machine, the GPU kernels on a GPU.

Every kernel goes through the engine (kernels.evaluate, mode "full": checked on every test
case, timed on the benchmark case, re-checked), exactly as a reader's Run button does.

CPU (`--cpu`, any machine): runs several rounds; each round calibrates the CPU ceilings
(kernels.calibrate, plus the read kernel on one core) and then evaluates every Part I CPU
kernel once. A kernel's percentages are taken against the ceilings of its own round and the
median over rounds is reported, with the spread of its times: on a shared machine the
bandwidth itself drifts from minute to minute, and single runs stray both ways. The median
ceilings are saved as this machine's calibration. Writes bench/results/part1_cpu.json.

GPU (`--gpu`, needs a CUDA GPU): times a device-to-device copy as the bandwidth yardstick,
then the transpose ladder, the reductions and vector_add/saxpy in every backend, each as
GB/s and percent of that copy. Writes bench/results/part1.json.

    python bench/part1.py --cpu [--repeats 5]
    python bench/part1.py --gpu
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results"

# (row, problem, solution file under solutions/correct, threads or None for Numba's
# default). Every CPU row runs on the numba-cpu backend.
CPU_ROWS: tuple[tuple[str, str, str, int | None], ...] = (
    ("triad_one_core", "cpu_triad", "triad_one_core", None),
    ("triad_parallel", "cpu_triad", "triad_parallel", None),
    ("triad_parallel_1_thread", "cpu_triad", "triad_parallel", 1),
    ("fma_one_chain", "cpu_fma_peak", "fma_one_chain", None),
    ("fma_blocked", "cpu_fma_peak", "fma_blocked", None),
    ("fma_blocked_parallel", "cpu_fma_peak", "fma_blocked_parallel", None),
    ("simd_sum_one_accumulator", "cpu_simd_sum", "sum_one_accumulator", None),
    ("simd_sum_8_accumulators", "cpu_simd_sum", "sum_8_accumulators", None),
    ("simd_sum_fastmath", "cpu_simd_sum", "sum_fastmath", None),
    ("simd_sum_16_scalars_fastmath", "cpu_simd_sum", "sum_16_scalars_fastmath", None),
    ("parallel_sum_shared_slots", "cpu_parallel_sum", "sum_shared_slots", None),
    ("parallel_sum_padded_slots", "cpu_parallel_sum", "sum_padded_slots", None),
    ("parallel_sum_local_accumulator", "cpu_parallel_sum", "sum_local_accumulator", None),
    ("parallel_sum_local_1_thread", "cpu_parallel_sum", "sum_local_accumulator", 1),
    ("parallel_sum_prange", "cpu_parallel_sum", "sum_prange_reduction", None),
)
CPU_SUFFIX = ".numba_cpu.py"

GPU_ROWS: tuple[tuple[str, str, str, str], ...] = (
    ("transpose_naive", "transpose", "transpose_naive.cu", "cuda"),
    ("transpose_tiled", "transpose", "transpose_tiled.cu", "cuda"),
    ("transpose_tiled_padded", "transpose", "transpose_tiled_padded.cu", "cuda"),
    ("transpose_smem", "transpose_smem", "transpose_tiled_padded.cu", "cuda"),
    ("transpose_numba_cuda", "transpose", "transpose_tiled_padded.numba_cuda.py", "numba-cuda"),
    ("transpose_triton", "transpose", "transpose_blocked.triton.py", "triton"),
    ("sum_tree_atomic", "sum", "reduce_sum.cu", "cuda"),
    ("sum_warp_shuffle", "reduce_warp_shuffle", "reduce_warp_shuffle.cu", "cuda"),
    ("sum_shuffle_float4", "sum", "reduce_sum_shuffle_float4.cu", "cuda"),
    ("sum_shuffle_float4_1gib", "sum", "reduce_sum_shuffle_float4.cu", "cuda"),
    ("sum_numba_cuda", "sum", "reduce_sum.numba_cuda.py", "numba-cuda"),
    ("sum_triton", "sum", "reduce_sum.triton.py", "triton"),
    ("sum_triton_persistent", "sum", "reduce_sum_persistent.triton.py", "triton"),
    ("vector_add_cuda", "vector_add", "vector_add.cu", "cuda"),
    ("vector_add_float4", "vector_add", "vector_add_float4.cu", "cuda"),
    ("vector_add_numba_cuda", "vector_add", "vector_add.numba_cuda.py", "numba-cuda"),
    ("vector_add_triton", "vector_add", "vector_add.triton.py", "triton"),
    ("saxpy_cuda", "saxpy", "saxpy.cu", "cuda"),
    ("saxpy_float4", "saxpy", "saxpy_float4.cu", "cuda"),
    ("saxpy_numba_cuda", "saxpy", "saxpy.numba_cuda.py", "numba-cuda"),
    ("saxpy_triton", "saxpy", "saxpy.triton.py", "triton"),
)
# The library baselines the engine times next to a kernel, reported as rows of their own.
GPU_BASELINES = {
    "transpose_baseline": "transpose_tiled_padded",
    "sum_baseline": "sum_shuffle_float4",
}


def _commit() -> str:
    from bench.benchlib import commit

    return commit()


def _today() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")


# Rows timed on another benchmark case than the problem's first: row name -> case name.
GPU_CASES = {"sum_shuffle_float4_1gib": "256M elements (1 GiB read)"}


def _evaluate(
    problem: str, backend: str, file: str, cap_s: float, benchmark: str | None = None
) -> Any:
    from kplay.kernels.catalog import get_problem
    from kplay.kernels.evaluate import evaluate
    from kplay.kernels.models import RunJob

    source = get_problem(problem).solution_path("correct", file).read_text()
    job = RunJob(
        problem=problem, backend=backend, source=source, timing_cap_s=cap_s, benchmark=benchmark
    )
    return evaluate(job)


def _r(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


# ------------------------------------------------------------------ CPU


def _calibrate_round() -> tuple[Any, float]:
    """One calibration (Ceilings) and the single-core read bandwidth in bytes/s."""
    from kplay.kernels.calibrate import calibrate_cpu

    ceilings = calibrate_cpu(n=1 << 24, cap_s=0.8)
    return ceilings, one_core_read()


def one_core_read(n: int = 1 << 24) -> float:
    """The calibration's read kernel on a single thread: what one core can pull from DRAM,
    the fair yardstick for a single-threaded kernel."""
    import numba
    import numpy as np

    from kplay.kernels import timing
    from kplay.kernels.calibrate import _cpu_kernels

    _, read, _ = _cpu_kernels()
    data = np.random.default_rng(0).random(n)
    default = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        read(data)
        stage = timing.time_cpu(lambda: read(data), cap_s=0.8)
    finally:
        numba.set_num_threads(default)
    return 8.0 * n / ((stage.median_us or 0.0) * 1e-6)


def _ceilings_record(rounds: list[tuple[Any, float]]) -> tuple[Any, dict[str, Any]]:
    """The median of each figure over the rounds (and its range), as Ceilings and a row."""
    fields = ("copy_bytes_per_s", "read_bytes_per_s", "fp32_flops_per_s")
    first = rounds[0][0]
    middle = {f: statistics.median(getattr(c, f) for c, _ in rounds) for f in fields}
    ceilings = first.model_copy(update=middle)
    ceilings.notes = f"median of {len(rounds)} calibrations (bench/part1.py); {first.notes}"
    record: dict[str, Any] = {"device": first.device, "runs": len(rounds)}
    for field, unit in zip(fields, ("copy_gbs", "read_gbs", "fp32_gflops"), strict=True):
        values = [getattr(c, field) / 1e9 for c, _ in rounds]
        record[unit] = _r(statistics.median(values))
        record[f"{unit}_max"] = _r(max(values))
        record[f"{unit}_min"] = _r(min(values))
    one_core = [bps / 1e9 for _, bps in rounds]
    record["read_gbs_one_core"] = _r(statistics.median(one_core))
    record["read_gbs_one_core_max"] = _r(max(one_core))
    record["read_gbs_one_core_min"] = _r(min(one_core))
    record["ridge_flops_per_byte"] = _r(ceilings.fp32_flops_per_s / ceilings.copy_bytes_per_s)
    return ceilings, record


def _time_row(problem: str, file: str, threads: int | None, cap_s: float) -> Any:
    """One engine evaluation with Numba's pool set to `threads` (None: the default)."""
    import numba

    default = numba.get_num_threads()
    try:
        numba.set_num_threads(threads or default)
        return _evaluate(problem, "numba-cpu", file, cap_s)
    finally:
        numba.set_num_threads(default)


def _cpu_row(problem: str, runs: list[tuple[Any, Any, float]]) -> dict[str, Any]:
    """Figures of one kernel from its runs: (result, round's ceilings, round's one-core read).

    Percentages are taken against the ceilings measured in the same round, then the median
    over rounds is reported, so that a machine whose bandwidth drifts does not skew them."""
    from kplay.kernels import formula, roofline
    from kplay.kernels.catalog import get_problem

    for result, _, _ in runs:
        if result.state.value != "done" or not result.timing or not result.timing.median_us:
            return {"state": result.state.value, "message": result.message}
    spec = get_problem(problem)
    last = runs[-1][0].timing
    flops = float(formula.evaluate(spec.flops, dict(last.params)))
    nbytes = float(formula.evaluate(spec.bytes, dict(last.params)))
    medians = [r.timing.median_us for r, _, _ in runs]
    median = statistics.median(medians)

    def pct(of: Callable[[Any, float, float], float]) -> float | None:
        return _r(statistics.median(100.0 * of(c, one, r.timing.median_us) for r, c, one in runs))

    def rate(t_us: float) -> float:
        return nbytes / (t_us * 1e-6)

    def share_of_roof(ceilings: Any, t_us: float) -> float:
        placed = roofline.place(flops, nbytes, t_us, ceilings, spec.compute_ceiling)
        return placed.percent_of_roofline / 100.0 if placed else float("nan")

    place = roofline.place(flops, nbytes, median, runs[-1][1], spec.compute_ceiling)
    return {
        "state": "done",
        "case": last.case,
        "threads": last.threads,
        "median_us": _r(median),
        "fastest_us": _r(min(medians)),
        "slowest_us": _r(max(medians)),
        "spread_percent": _r(100.0 * (max(medians) - min(medians)) / median),
        "runs": len(medians),
        "gbs": _r(nbytes / median / 1e3),
        "gflops": _r(flops / median / 1e3),
        "percent_of_roofline": pct(lambda c, one, t: share_of_roof(c, t)),
        "percent_of_read": pct(lambda c, one, t: rate(t) / c.read_bytes_per_s),
        "percent_of_one_core_read": pct(lambda c, one, t: rate(t) / one),
        "percent_of_copy": pct(lambda c, one, t: rate(t) / c.copy_bytes_per_s),
        "bound": place.bound if place else None,
    }


def measure_cpu(repeats: int, cap_s: float, log: Callable[[str], None]) -> dict[str, Any]:
    """`repeats` rounds; each calibrates, then evaluates every kernel once."""
    import numba

    from kplay.kernels import roofline

    load_before = os.getloadavg()
    rounds: list[tuple[Any, float]] = []
    runs: dict[str, list[tuple[Any, Any, float]]] = {name: [] for name, *_ in CPU_ROWS}
    for k in range(repeats):
        log(f"round {k + 1}/{repeats}: calibrate ...")
        ceilings, one_core = _calibrate_round()
        rounds.append((ceilings, one_core))
        for name, problem, stem, threads in CPU_ROWS:
            log(f"round {k + 1}/{repeats}: {name} ...")
            result = _time_row(problem, stem + CPU_SUFFIX, threads, cap_s)
            runs[name].append((result, ceilings, one_core))
    median_ceilings, record = _ceilings_record(rounds)
    roofline.save_ceilings(median_ceilings)
    rows: dict[str, Any] = {"ceilings": record}
    for name, problem, *_ in CPU_ROWS:
        rows[name] = _cpu_row(problem, runs[name])
    rows["meta"] = {
        "device": median_ceilings.device,
        "cpus": os.cpu_count(),
        "numba_threads": numba.get_num_threads(),
        "numba": numba.__version__,
        "date": _today(),
        "commit": _commit(),
        "command": f"python bench/part1.py --cpu --repeats {repeats}",
        "repeats": repeats,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    return rows


# ------------------------------------------------------------------ GPU


def copy_bandwidth(size_bytes: int = 1 << 30, cap_s: float = 2.0) -> float:
    """Device-to-device cudaMemcpy, L2 flushed per rep: bytes read + written per second."""
    import cupy

    from kplay.kernels import timing

    src = cupy.ones(size_bytes // 4, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    rt = cupy.cuda.runtime
    stage = timing.time_gpu(
        lambda: rt.memcpyAsync(dst.data.ptr, src.data.ptr, size_bytes, rt.memcpyDeviceToDevice, 0),
        cap_s=cap_s,
    )
    return 2.0 * size_bytes / ((stage.median_us or 0.0) * 1e-6)


def _gpu_row(result: Any, copy_bps: float) -> dict[str, Any]:
    row: dict[str, Any] = {"state": result.state.value}
    t, rl = result.timing, result.roofline
    if result.state.value != "done" or t is None or not t.timed or rl is None:
        row["message"] = result.message
        return row
    row.update(
        backend=result.backend,
        case=t.case,
        median_us=_r(t.median_us),
        iqr_us=_r(t.iqr_us),
        reps=t.reps,
        bytes=rl.bytes,
        gbs=_r(rl.achieved_bytes_per_s / 1e9, 0),
        percent_of_copy=_r(100.0 * rl.achieved_bytes_per_s / copy_bps),
        percent_of_roofline=_r(rl.percent_of_roofline),
        ceilings_source=rl.ceilings_source,
        baseline_us=_r(rl.baseline_median_us),
    )
    res = result.compile.resources if result.compile else []
    if res and res[0].registers is not None:
        row.update(registers=res[0].registers, spill_bytes=res[0].spill_stores_bytes)
    return row


def _baseline_row(row: dict[str, Any], copy_bps: float) -> dict[str, Any] | None:
    base_us, nbytes = row.get("baseline_us"), row.get("bytes")
    if not base_us or not nbytes:
        return None
    base_gbs = nbytes / base_us / 1e3
    return {
        "state": "done",
        "case": row.get("case"),
        "median_us": base_us,
        "gbs": _r(base_gbs, 0),
        "percent_of_copy": _r(100.0 * base_gbs * 1e9 / copy_bps),
    }


def measure_gpu(cap_s: float, log: Callable[[str], None]) -> dict[str, Any]:
    from kplay.kernels import roofline
    from kplay.kernels.sysinfo import gpu_facts

    facts = gpu_facts()
    log("copy bandwidth ...")
    copy_bps = copy_bandwidth()
    ceilings = roofline.ceilings_for(facts["device"])
    rows: dict[str, Any] = {"copy": {"gbs": _r(copy_bps / 1e9, 0)}}
    if ceilings is not None:
        rows["ceilings"] = {
            "source": ceilings.source,
            "copy_gbs": _r((ceilings.copy_bytes_per_s or 0) / 1e9, 0),
            "fp32_gflops": _r((ceilings.fp32_flops_per_s or 0) / 1e9, 0),
            "ridge_flops_per_byte": _r(
                (ceilings.fp32_flops_per_s or 0) / (ceilings.copy_bytes_per_s or 1)
            ),
        }
    for name, problem, file, backend in GPU_ROWS:
        log(f"{name} ...")
        result = _evaluate(problem, backend, file, cap_s, GPU_CASES.get(name))
        rows[name] = _gpu_row(result, copy_bps)
    for name, source in GPU_BASELINES.items():
        base = _baseline_row(rows.get(source, {}), copy_bps)
        if base is not None:
            rows[name] = base
    rows["meta"] = {
        "device": facts["device"],
        "date": _today(),
        "commit": _commit(),
        "cuda": facts.get("cuda"),
        "driver": facts.get("driver"),
        "command": "python bench/part1.py --gpu",
    }
    return rows


# ------------------------------------------------------------------ reporting


def markdown_table(rows: dict[str, Any]) -> str:
    keys = (
        "state",
        "median_us",
        "gbs",
        "gflops",
        "percent_of_roofline",
        "percent_of_copy",
        "percent_of_read",
        "percent_of_one_core_read",
    )
    extra = ("fastest_us", "slowest_us", "threads")
    lines = ["| row | " + " | ".join(keys + extra) + " |", "|---" * (len(keys + extra) + 1) + "|"]
    for name, row in rows.items():
        if name in ("meta", "ceilings", "copy") or not isinstance(row, dict):
            continue
        cells = ["-" if row.get(k) is None else str(row[k]) for k in keys + extra]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--cpu", action="store_true", help="measure the CPU kernels here")
    which.add_argument("--gpu", action="store_true", help="measure the GPU kernels (needs a GPU)")
    parser.add_argument(
        "--repeats", type=int, default=5, help="CPU: rounds of calibration + every kernel"
    )
    parser.add_argument("--cap", type=float, default=1.0, help="timing cap per run, seconds")
    parser.add_argument("--out", type=Path, default=None, help="results JSON to write")
    args = parser.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if args.gpu:
        from kplay.kernels.hardware import has_cuda_gpu

        if not has_cuda_gpu():
            log("part1: no CUDA GPU here; nothing measured")
            return 2
        rows = measure_gpu(args.cap, log)
        out = args.out or RESULTS / "part1.json"
    else:
        rows = measure_cpu(max(1, args.repeats), args.cap, log)
        out = args.out or RESULTS / "part1_cpu.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2) + "\n")
    print(json.dumps({k: rows[k] for k in ("meta", "ceilings", "copy") if k in rows}, indent=2))
    print(markdown_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
