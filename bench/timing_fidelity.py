"""Does our timer agree with other timers? Long and short kernels, four ways.

For a device copy (a float4 copy kernel over 1 GiB), cuBLAS SGEMM 4096^3 (through CuPy),
the project's tiled CUDA SGEMM, and the short memory-bound project kernels on their
problems' first benchmark case (vector_add and its float4 form, saxpy, the padded tiled
transpose, the float4 shuffle sum over 128 MiB), this prints the median time from
  * kernels.timing.time_gpu (the engine's timer: L2 flushed by a read sweep, CUDA events,
    adaptive reps),
  * triton.testing.do_bench (return_mode="median"), as shipped: its flush writes zeros
    over a 256 MB buffer, which leaves dirty lines in the L2,
  * the same do_bench with its flush replaced by the engine's read sweep,
  * Nsight Compute's gpu__time_duration (median over profiled launches; caches flushed
    and invalidated, clocks left alone), when `ncu` is on PATH,
and the run-to-run spread of the median over 5 separate evaluations of the project kernel.
Inputs of the project kernels are drawn as the engine draws them (kernels.check.prepare).

    python bench/timing_fidelity.py            # the table, Markdown
    python bench/timing_fidelity.py --target NAME --reps N   # (used under ncu)
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COPY_SRC = r"""
extern "C" __global__ void fidelity_copy(const float4* __restrict__ src, float4* __restrict__ dst,
                                         size_t n4) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}
"""


def _targets():  # type: ignore[no-untyped-def]
    """name -> (launch callable, flops, bytes). Built once per process."""
    import cupy
    import numpy as np

    from kplay.kernels.catalog import get_problem
    from kplay.kernels.sysinfo import gpu_facts

    sms = int(gpu_facts()["sm_count"])
    n = (1 << 30) // 4
    src = cupy.random.random(n, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    copy_k = cupy.RawModule(code=COPY_SRC).get_function("fidelity_copy")

    def copy() -> None:
        copy_k((sms * 8,), (512,), (src, dst, np.uint64(n // 4)))

    size = 4096
    a = cupy.random.random((size, size), dtype=cupy.float32)
    b = cupy.random.random((size, size), dtype=cupy.float32)
    c = cupy.empty((size, size), dtype=cupy.float32)

    def cublas() -> None:
        cupy.matmul(a, b, out=c)

    problem = get_problem("sgemm")
    path = _project_solution(problem)
    sizes = np.int32(size), np.int32(size), np.int32(size)
    project, name = _project_launch(
        problem, path.read_text(), {"M": size, "N": size, "K": size}, (a, b, c, *sizes)
    )
    targets = {
        "copy 1 GiB (float4 kernel)": (copy, "fidelity_copy"),
        "cuBLAS SGEMM 4096^3": (cublas, "gemm|xmma|cutlass|sm90"),
        f"project SGEMM ({path.name})": (project, name),
    }
    for slug, file in SHORT_KERNELS:
        targets.update(_short_target(slug, file))
    return targets


# Short memory-bound project kernels: (problem, CUDA solution file), timed on the
# problem's first benchmark case.
SHORT_KERNELS = (
    ("vector_add", "vector_add.cu"),
    ("vector_add", "vector_add_float4.cu"),
    ("saxpy", "saxpy.cu"),
    ("transpose", "transpose_tiled_padded.cu"),
    ("sum", "reduce_sum_shuffle_float4.cu"),
)


def _project_launch(problem, source: str, params: dict, args: tuple):  # type: ignore[no-untyped-def]
    """A project CUDA kernel compiled as the problem launches it: (launch, ncu kernel regex)."""
    import cupy

    from kplay.kernels import launch as launch_mod

    plan = launch_mod.plan(problem.launch["cuda"], source, None)
    spec = launch_mod.resolve(plan, params)
    module = cupy.RawModule(code=source, options=("-std=c++17",), name_expressions=[spec.kernel])
    fn = module.get_function(spec.kernel)
    grid = spec.grid + (1,) * (3 - len(spec.grid))
    block = spec.block + (1,) * (3 - len(spec.block))

    def run() -> None:
        fn(grid, block, args, shared_mem=spec.shared_mem_bytes)

    return run, spec.kernel.split("<")[0]


def _short_target(slug: str, file: str):  # type: ignore[no-untyped-def]
    from kplay.kernels import formula
    from kplay.kernels.arrays import ArrayOps
    from kplay.kernels.backends.base import ArrayKind
    from kplay.kernels.catalog import get_problem
    from kplay.kernels.check import prepare
    from kplay.kernels.perf import benchmark_case

    problem = get_problem(slug)
    case = benchmark_case(problem, "cuda")
    args = tuple(prepare(problem, case, ArrayOps(ArrayKind.cupy), seed=1).args)
    source = problem.solution_path("correct", file).read_text()
    run, name = _project_launch(problem, source, dict(case.params), args)
    mib = formula.evaluate(problem.bytes, case.params) / 2**20
    return {f"{file} ({case.name}, {mib:.0f} MiB moved)": (run, name)}


def _project_solution(problem):  # type: ignore[no-untyped-def]
    cuda = [p for b, p in problem.solutions("correct") if b == "cuda"]
    best = [p for p in cuda if "warptile" in p.name]
    return (best or cuda)[0]


def run_target(name_prefix: str, reps: int) -> None:
    import cupy

    for name, (fn, _) in _targets().items():
        if name.startswith(name_prefix):
            for _ in range(reps):
                fn()
            cupy.cuda.Device().synchronize()
            return
    raise SystemExit(f"no target {name_prefix!r}")


def ncu_median_us(name: str, regex: str, reps: int = 20) -> float | None:
    ncu = shutil.which("ncu")
    if ncu is None:
        return None
    cmd = [
        ncu,
        "--clock-control",
        "none",
        "--cache-control",
        "all",
        "--csv",
        "--metrics",
        "gpu__time_duration.sum",
        "-k",
        f"regex:{regex}",
        "--launch-skip",
        "3",
        sys.executable,
        __file__,
        "--target",
        name,
        "--reps",
        str(reps + 3),
    ]
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        },
    )
    text = proc.stdout[proc.stdout.find('"ID"') :] if '"ID"' in proc.stdout else ""
    values = []
    for row in csv.DictReader(io.StringIO(text)):
        if row.get("Metric Name") == "gpu__time_duration.sum":
            unit = row.get("Metric Unit", "ns")
            value = float(row["Metric Value"].replace(",", ""))
            scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}.get(unit, 1e-3)
            values.append(value * scale)
    if not values:
        print(f"ncu gave no rows for {name}: {proc.stderr[-800:]}", file=sys.stderr)
        return None
    # One target may launch several kernels per call (cuBLAS); sum per call, then median.
    per_call = len(values) // reps if reps and len(values) >= reps else 1
    sums = [sum(values[i : i + per_call]) for i in range(0, per_call * reps, per_call)]
    return statistics.median(sums) if sums else None


def _do_bench_clean(fn):  # type: ignore[no-untyped-def]
    """do_bench with its cache clearing replaced by the engine's read sweep (None if the
    installed Triton has no such hook)."""
    import triton.testing
    from triton import runtime

    from kplay.kernels import timing

    driver = runtime.driver.active
    if not hasattr(driver, "clear_cache"):
        return None
    flusher = timing._flusher()
    original = driver.clear_cache
    try:
        driver.clear_cache = lambda cache: flusher.flush()
        return triton.testing.do_bench(fn, warmup=100, rep=1000, return_mode="median") * 1000
    finally:
        driver.clear_cache = original


def spread_of_project(evals: int = 5) -> list[float]:
    """Median of `evals` separate full evaluations of the project's tiled SGEMM."""
    from kplay.kernels.catalog import get_problem
    from kplay.kernels.evaluate import evaluate
    from kplay.kernels.models import RunJob

    problem = get_problem("sgemm")
    source = _project_solution(problem).read_text()
    medians = []
    for i in range(evals):
        result = evaluate(RunJob(problem="sgemm", backend="cuda", source=source, seed=i))
        assert result.timing and result.timing.median_us, result.message
        medians.append(result.timing.median_us)
    return medians


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--target")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--no-spread", action="store_true", help="skip the 5-evaluation spread")
    args = parser.parse_args()
    if args.target:
        run_target(args.target, args.reps)
        return
    import triton.testing

    from kplay.kernels import timing

    rows = []
    for name, (fn, regex) in _targets().items():
        ours = timing.time_gpu(fn, cap_s=5.0)
        stock = triton.testing.do_bench(fn, warmup=100, rep=1000, return_mode="median") * 1000
        clean = _do_bench_clean(fn)
        ncu = ncu_median_us(name, regex)
        rows.append((name, ours, stock, clean, ncu))
    print(
        "| kernel | engine median (µs) | IQR (µs) | reps | do_bench (µs) | engine/do_bench | "
        "do_bench, read-sweep flush (µs) | engine/that | ncu gpu__time_duration (µs) | "
        "engine/ncu |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, ours, stock, clean, ncu in rows:
        ratio_ncu = f"{ours.median_us / ncu:.3f}" if ncu else "n/a"
        ncu_s = f"{ncu:.1f}" if ncu else "n/a"
        clean_s = f"{clean:.1f} | {ours.median_us / clean:.3f}" if clean else "n/a | n/a"
        print(
            f"| {name} | {ours.median_us:.1f} | {ours.iqr_us:.1f} | {ours.reps} | {stock:.1f} | "
            f"{ours.median_us / stock:.3f} | {clean_s} | {ncu_s} | {ratio_ncu} |"
        )
    if args.no_spread:
        return
    medians = spread_of_project()
    lo, hi, mid = min(medians), max(medians), statistics.median(medians)
    print(
        f"\nRun-to-run: 5 separate evaluations of the project SGEMM, medians (µs): "
        f"{', '.join(f'{m:.1f}' for m in medians)}; spread (max-min)/median = "
        f"{100 * (hi - lo) / mid:.2f}%"
    )


if __name__ == "__main__":
    main()
