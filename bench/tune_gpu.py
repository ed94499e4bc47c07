"""Sweeps of the book's tunable CUDA kernels on one GPU, to choose their default sizes.

    python bench/tune_gpu.py [--only sgemm,wmma,mma,transpose,reduce] [--json-out FILE]

Each kernel file keeps its sizes behind `#ifndef` macros; this script compiles variants
with other values (NVRTC, the engine's options), checks each against cuBLAS or NumPy on an
edge shape and on the benchmark shape, and times it with the engine's own timer
(kernels.timing: CUDA events, L2 flushed before every rep, median). The sweeps recorded in
bench/RESULTS.md (up to commit `00b2d4c`) used a timer of the script's own, the same method
with 25 reps. It is a tuning aid:
the figures the book quotes come from bench/gemm_ladder.py and bench/part1.py, which time
the chosen defaults through the engine. Also measures the ceiling of any WMMA kernel:
mma.sync on fragments held in registers, no memory traffic at all.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ["CUPY_TF32"] = "0"
os.environ["NVIDIA_TF32_OVERRIDE"] = "0"

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

from bench.tune_common import (  # noqa: E402
    REDUCE,
    ROWS,
    SGEMM,
    TRANSPOSE,
    WMMA,
    WMMA_CLUSTER,
    GemmCase,
    attempt,
    build,
    edge_inputs,
    gemm_grid,
    record,
    regs,
    timed,
    wmma_smem_bytes,
)
from bench.tune_wmma import mma_peak, wmma_cluster_sweep, wmma_diag, wmma_sweep  # noqa: E402

# What bench/gemm_stalls.py imports from this script (the helpers live in bench/tune_common.py).
__all__ = ["SGEMM", "WMMA", "WMMA_CLUSTER", "build", "gemm_grid", "wmma_smem_bytes"]

# ------------------------------------------------------------------ SGEMM


def sgemm_sweep() -> None:
    rng = np.random.default_rng(1)
    n = 4096
    a = cp.asarray(rng.uniform(-1, 1, (n, n)).astype(np.float32))
    b = cp.asarray(rng.uniform(-1, 1, (n, n)).astype(np.float32))
    c = cp.empty((n, n), dtype=cp.float32)
    ref = cp.matmul(a, b)
    cublas_us = timed(lambda: cp.matmul(a, b, out=c))
    record("sgemm", "cuBLAS", us=round(cublas_us, 1), tflops=round(2.0 * n**3 / cublas_us / 1e6, 2))
    case = GemmCase(a, b, ref, edge_inputs(rng, np.float32), cublas_us)

    keys = ("BM", "BN", "BK", "WARPS_M", "LANES_N", "MIN_BLOCKS", "GROUP_M", "NTHREADS", "B_ASYNC")
    variants = [
        (64, 128, 16, 2, 8, 3, 0, 128, 1),
        (128, 128, 8, 2, 4, 2, 0, 256, 0),
        (64, 256, 16, 2, 8, 2, 0, 256, 1),
        (64, 128, 16, 2, 8, 3, 0, 128, 1),
    ]
    for v in variants:
        d = dict(zip(keys, v, strict=True))
        name = ",".join(f"{k}={v}" for k, v in d.items())

        def run(d: dict[str, int] = d) -> dict[str, Any]:
            return case.measure(build(SGEMM, "sgemm", d), d, tol=5e-2, edge_tol=1e-3)

        attempt("sgemm", name, run)


# ------------------------------------------------------------------ transpose and reduce


def copy_us(nbytes: int) -> float:
    src = cp.empty(nbytes // 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    return timed(lambda: dst.data.copy_from_device_async(src.data, nbytes))


def transpose_sweep() -> None:
    rows = cols = 8192
    rng = np.random.default_rng(3)
    x = cp.asarray(rng.standard_normal((rows, cols), dtype=np.float32))
    y = cp.empty((cols, rows), dtype=cp.float32)
    nbytes = 2 * x.nbytes
    cu = copy_us(x.nbytes)
    record("transpose", "memcpy of the same bytes", us=round(cu, 1),
           tbps=round(nbytes / cu / 1e6, 3))  # fmt: skip
    ex = cp.asarray(rng.standard_normal((67, 133), dtype=np.float32))
    for tile, brows in ((32, 8), (32, 4), (32, 16), (32, 32), (64, 4), (64, 8), (64, 16)):

        def run(tile: int = tile, brows: int = brows) -> dict[str, Any]:
            k = build(TRANSPOSE, "transpose", {"TILE": tile, "BLOCK_ROWS": brows})

            def launch(src: Any, dst: Any, r: int, c: int) -> None:
                grid = ((c + tile - 1) // tile, (r + tile - 1) // tile)
                k(grid, (tile, brows), (src, dst, np.int32(r), np.int32(c)))

            ey = cp.zeros((133, 67), dtype=cp.float32)
            launch(ex, ey, 67, 133)
            us = timed(lambda: launch(x, y, rows, cols))
            ok = bool(cp.array_equal(y, x.T)) and bool(cp.array_equal(ey, ex.T))
            return dict(ok=ok, us=round(us, 1), tbps=round(nbytes / us / 1e6, 3),
                        pct_copy=round(100 * cu / us, 1), res=regs(k))  # fmt: skip

        attempt("transpose", f"TILE={tile},BLOCK_ROWS={brows}", run)


def reduce_sweep() -> None:
    for n in (33554432, 268435456):
        reduce_case(n)


def reduce_case(n: int) -> None:
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    rng = np.random.default_rng(4)
    x = cp.asarray(rng.uniform(0, 1, n).astype(np.float32))
    out = cp.zeros(1, dtype=cp.float32)
    expect = float(cp.sum(x, dtype=cp.float64))
    cu = copy_us(x.nbytes)
    copy_rate = 2 * x.nbytes / cu
    record("reduce", f"n={n}: memcpy of the same bytes", us=round(cu, 1),
           tbps=round(copy_rate / 1e6, 3))  # fmt: skip
    for unroll in (4, 8):
        k = build(REDUCE, "reduce_sum", {"UNROLL": unroll})
        for block in (256, 512, 1024):
            for per_sm in (2, 4, 8):
                blocks = sms * per_sm * 1024 // block

                def run(k: Any = k, block: int = block, blocks: int = blocks) -> dict[str, Any]:
                    def launch() -> None:
                        k((blocks,), (block,), (x, out, np.int32(n)))

                    us = timed(launch, lambda: out.fill(0))
                    got = float(out[0])
                    ok = abs(got - expect) <= 1e-4 * abs(expect)
                    rate = x.nbytes / us
                    pct = round(100 * rate / copy_rate, 1)
                    return dict(ok=ok, us=round(us, 1), tbps_read=round(rate / 1e6, 3),
                                pct_copy_bw=pct, res=regs(k))  # fmt: skip

                attempt("reduce", f"n={n},UNROLL={unroll},block={block},grid={blocks}", run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="sgemm,wmma,mma,transpose,reduce")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    steps = {"sgemm": sgemm_sweep, "wmma": wmma_sweep, "wmmac": wmma_cluster_sweep,
             "diag": wmma_diag, "mma": mma_peak, "transpose": transpose_sweep,
             "reduce": reduce_sweep}  # fmt: skip
    for name in args.only.split(","):
        steps[name]()
        if args.json_out:
            args.json_out.write_text(json.dumps(ROWS, indent=1))


if __name__ == "__main__":
    main()
