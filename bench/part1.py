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
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results"

# The CPU half and its rows live in bench/part1_cpu.py; CPU_ROWS and CPU_SUFFIX are
# re-exported because tests/app/test_book_part1.py reads every row table off this module.
from bench.part1_common import _commit, _evaluate, _r, _today  # noqa: E402
from bench.part1_cpu import CPU_ROWS, CPU_SUFFIX, measure_cpu  # noqa: E402, F401

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
# Rows timed on another benchmark case than the problem's first: row name -> case name.
GPU_CASES = {"sum_shuffle_float4_1gib": "256M elements (1 GiB read)"}


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
