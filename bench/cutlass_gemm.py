"""The CUTLASS C++ GEMMs of `gemm_bf16` against cuBLAS BF16 at 4096^3, on one GPU.

Each correct `*.cutlass.cu` solution goes the learner's way: compiled by nvcc in a box
(kernels.remote.spawn_plain_box), loaded and launched by the engine, checked on every
test case and timed on the 4096^3 benchmark case by the engine's timer (L2 flushed before
every rep). Beside them, through the same timer and on the same inputs:

- cuBLAS with the problem's contract (cublasGemmEx, bf16 in, fp32 out and compute), the
  problem's baseline;
- torch.matmul on bf16 tensors (bf16 out), the usual "cuBLAS BF16" figure.

Writes bench/results/cutlass_gemm.json and prints a Markdown table.

    python bench/cutlass_gemm.py                 # needs a GPU, nvcc and nvidia-cutlass
    python bench/cutlass_gemm.py --cap-s 2       # seconds of timing per kernel
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results" / "cutlass_gemm.json"
SOLUTIONS = ROOT / "kernels" / "problems" / "gemm_bf16" / "solutions" / "correct"
SIZE = 4096


def _solution_row(path: Path, cap_s: float) -> dict[str, Any]:
    from kplay.kernels.evaluate import evaluate
    from kplay.kernels.models import RunJob
    from kplay.kernels.remote import spawn_plain_box

    job = RunJob(problem="gemm_bf16", backend="cutlass", source=path.read_text(),
                 mode="full", timing_cap_s=cap_s)  # fmt: skip
    client, proc = spawn_plain_box()
    try:
        result = evaluate(job, box=client)
    finally:
        client.close()
        proc.wait(timeout=60)
    row: dict[str, Any] = {"state": result.state.value}
    if result.compile is not None:
        row["compile_ms"] = result.compile.duration_ms
        if result.compile.resources:
            res = result.compile.resources[0]
            row.update(registers=res.registers, spill_bytes=res.spill_stores_bytes)
    if result.state.value != "done" or result.timing is None or not result.timing.timed:
        row["message"] = result.message
        return row
    row.update(median_us=result.timing.median_us, reps=result.timing.reps)
    if result.roofline is not None:
        row.update(
            flops_per_s=result.roofline.achieved_flops_per_s,
            percent_of_roofline=result.roofline.percent_of_roofline,
            engine_baseline_us=result.roofline.baseline_median_us,
        )
    return row


def _libraries(cap_s: float) -> dict[str, dict[str, Any]]:
    """cuBLAS (the problem's baseline) and torch.matmul, timed like the kernels."""
    import cupy
    import torch

    from kplay.kernels import timing
    from kplay.kernels.arrays import ArrayOps
    from kplay.kernels.backends.base import ArrayKind
    from kplay.kernels.catalog import get_problem
    from kplay.kernels.check import prepare
    from kplay.kernels.perf import benchmark_case

    problem = get_problem("gemm_bf16")
    case = benchmark_case(problem, "cutlass")
    ops = ArrayOps(ArrayKind.cupy)
    prepared = prepare(problem, case, ops, case.seed)
    params = dict(case.params)
    arrays = {name: cupy.array(ops.as_cupy(dev)) for name, dev in prepared.device.items()}
    gemm_ex = timing.time_gpu(lambda: problem.reference.baseline(arrays, params, cupy), cap_s=cap_s)
    a = torch.rand(SIZE, SIZE, device="cuda", dtype=torch.bfloat16)
    b = torch.rand(SIZE, SIZE, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(SIZE, SIZE, device="cuda", dtype=torch.bfloat16)
    matmul = timing.time_gpu(lambda: torch.matmul(a, b, out=out), cap_s=cap_s)
    return {
        "cublas_gemmex_bf16_f32out": {"median_us": gemm_ex.median_us, "reps": gemm_ex.reps},
        "torch_matmul_bf16": {"median_us": matmul.median_us, "reps": matmul.reps},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cap-s", type=float, default=1.0, help="timing seconds per kernel")
    args = parser.parse_args()

    from kplay.kernels.hardware import current_gpu

    rows: dict[str, dict[str, Any]] = _libraries(args.cap_s)
    for path in sorted(SOLUTIONS.glob("*.cutlass.cu")):
        rows[path.name.removesuffix(".cutlass.cu")] = _solution_row(path, args.cap_s)
    flops = 2.0 * SIZE**3
    cublas = rows["cublas_gemmex_bf16_f32out"]["median_us"]
    torch_us = rows["torch_matmul_bf16"]["median_us"]
    for row in rows.values():
        us = row.get("median_us")
        if us:
            row["tflops"] = round(flops / (us * 1e-6) / 1e12, 1)
            row["percent_of_cublas"] = round(100.0 * cublas / us, 1)
            row["percent_of_torch_matmul"] = round(100.0 * torch_us / us, 1)
    out = {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": current_gpu().name,
        "size": SIZE,
        "rows": rows,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print("| row | state | median us | TFLOP/s | % cuBLAS (f32 out) | % torch.matmul |")
    print("|---|---|---|---|---|---|")
    for name, row in rows.items():
        print(
            f"| {name} | {row.get('state', 'done')} | {row.get('median_us', '-')} | "
            f"{row.get('tflops', '-')} | {row.get('percent_of_cublas', '-')} | "
            f"{row.get('percent_of_torch_matmul', '-')} |"
        )
        if row.get("message"):
            print(f"|  | {row['message']} | | | | |")


if __name__ == "__main__":
    main()
