"""The CPU half of bench/part1.py (`--cpu`): rounds of calibration plus every Part I CPU
kernel through the engine, each kernel's percentages taken against its own round's ceilings
and the median over rounds reported. The median ceilings are saved as this machine's
calibration."""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from typing import Any

from bench.part1_common import _commit, _evaluate, _r, _today

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
