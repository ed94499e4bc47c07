"""The WMMA sections of bench/tune_gpu.py: the pipelined kernel's sizes (`wmma`), the
cluster kernel against it (`wmmac`), where the pipelined kernel's time goes (`diag`), and the
ceiling of any WMMA kernel, mma_sync on fragments held in registers (`mma`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cupy as cp
import numpy as np

from bench.tune_common import (
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


def wmma_case(section: str, seed: int) -> GemmCase:
    """Random fp16 4096^3 inputs and edge products, with the `hgemm_wmma` baseline (cuBLAS,
    fp16 in, fp32 out) timed now and recorded under `section`: what every WMMA section
    measures against."""
    from kplay.kernels.catalog import get_problem

    hg = get_problem("hgemm_wmma").reference
    rng = np.random.default_rng(seed)
    n = 4096
    a = cp.asarray(rng.uniform(-1, 1, (n, n)).astype(np.float16))
    b = cp.asarray(rng.uniform(-1, 1, (n, n)).astype(np.float16))
    ref = cp.empty((n, n), dtype=cp.float32)
    arrays = {"A": a, "B": b, "C": ref}
    params = {"M": n, "N": n, "K": n}
    cublas_us = timed(lambda: hg.baseline(arrays, params, cp))
    record(section, "cuBLAS fp16->fp32", us=round(cublas_us, 1),
           tflops=round(2.0 * n**3 / cublas_us / 1e6, 1))  # fmt: skip
    return GemmCase(a, b, ref, edge_inputs(rng, np.float16), cublas_us)


def wmma_sweep() -> None:
    case = wmma_case("wmma", 2)

    keys = ("BM", "BN", "BK", "WARPS_M", "STAGES", "GROUP_M", "NTHREADS", "MIN_BLOCKS", "PREFETCH")
    variants = [
        (128, 256, 64, 2, 3, 8, 256, 0, 1),  # the default
        (128, 256, 64, 2, 4, 8, 256, 0, 1),
        (256, 128, 64, 4, 3, 8, 256, 0, 1),
        (128, 256, 32, 2, 3, 8, 256, 0, 1),
        (128, 128, 64, 2, 3, 8, 128, 2, 1),
        (128, 128, 32, 2, 4, 8, 256, 0, 0),  # the previous default
    ]
    for v in variants:
        d = dict(zip(keys, v, strict=True))
        name = ",".join(f"{k}={v}" for k, v in d.items())
        smem = wmma_smem_bytes(d)

        def run(d: dict[str, int] = d, smem: int = smem) -> dict[str, Any]:
            k = build(WMMA, "hgemm", d)
            k.max_dynamic_shared_size_bytes = smem
            return {**case.measure(k, d, tol=1e-2, edge_tol=1e-2, smem=smem), "smem": smem}

        attempt("wmma", name, run)


def wmma_cluster_sweep() -> None:
    """The cluster kernel (B slices shared by two blocks through multicast bulk copies)
    against the pipelined kernel's defaults, both timed in this run. Each row names its
    kernel file (`kernel`: "wmma" the pipelined one, "wmmac" the cluster one)."""
    case = wmma_case("wmmac", 3)
    base = dict(BM=128, BN=256, BK=64, WARPS_M=2, NTHREADS=256)
    runs: list[tuple[Path, dict[str, int]]] = [
        (WMMA, {**base, "STAGES": 3, "GROUP_M": 8, "PREFETCH": 1}),  # the pipelined kernel
    ]
    keys = ("CLUSTER", "A_ASYNC", "STAGES", "GROUP_M", "REFILL_STEP")
    for v in [(2, 0, 4, 4, 1), (2, 1, 4, 4, 1), (2, 0, 3, 4, 1), (2, 0, 4, 4, 0),
              (2, 0, 4, 4, 2), (2, 0, 4, 8, 1), (1, 0, 4, 8, 1), (1, 1, 4, 8, 1)]:  # fmt: skip
        runs.append((WMMA_CLUSTER, {**base, **dict(zip(keys, v, strict=True))}))
    for path, d in runs:
        name = ",".join(f"{k}={v}" for k, v in d.items())
        kernel = "wmmac" if path == WMMA_CLUSTER else "wmma"
        smem = wmma_smem_bytes(d)

        def run(path: Path = path, d: dict[str, int] = d, smem: int = smem,
                kernel: str = kernel) -> dict[str, Any]:  # fmt: skip
            k = build(path, "hgemm", d)
            k.max_dynamic_shared_size_bytes = smem
            measured = case.measure(k, d, tol=1e-2, edge_tol=1e-2, smem=smem)
            return {"kernel": kernel, **measured, "smem": smem}

        attempt("wmmac", name, run)


def wmma_diag() -> None:
    """Where the pipelined WMMA kernel's time goes: the same kernel with parts of its slice
    boundary cut out of the source. Only the first variant computes the product; the others
    multiply stale shared memory (their error is reported, not checked) and time what is left."""
    case = wmma_case("wmma_diag", 4)
    n = case.a.shape[0]
    d = dict(BM=128, BN=256, BK=64, WARPS_M=2, STAGES=3, GROUP_M=8, NTHREADS=256, PREFETCH=1)
    smem = wmma_smem_bytes(d)
    src = WMMA.read_text()
    wait = "                cp_async_wait<STAGES - 2>();\n                __syncthreads();\n"
    refill = "if (s + STAGES < slices) load(freed, s + STAGES);"
    assert wait in src and refill in src
    cuts = {
        "as written": [],
        "no refill": [(refill, "")],
        "no barrier": [(wait, "                cp_async_wait<STAGES - 2>();\n")],
        "no refill, no wait, no barrier": [(refill, ""), (wait, "")],
    }
    for name, edits in cuts.items():
        body = src
        for old, new in edits:
            body = body.replace(old, new)

        def run(body: str = body) -> dict[str, Any]:
            k = build(body, "hgemm", d)
            k.max_dynamic_shared_size_bytes = smem
            grid = gemm_grid(d, n, n)
            args = (case.a, case.b, case.c, np.int32(n), np.int32(n), np.int32(n))
            us = timed(lambda: k(grid, (256,), args, shared_mem=smem))
            err = float(cp.abs(case.c - case.ref).max())
            return dict(us=round(us, 1), tflops=round(case.flops / us / 1e6, 1),
                        pct_cublas=round(100 * case.base_us / us, 1), err=f"{err:.1e}")  # fmt: skip

        attempt("wmma_diag", name, run)


MMA_PEAK = r"""
#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;
// Each warp keeps FRAGS accumulators and one A and one B fragment in registers and
// issues ITERS rounds of FRAGS independent mma_sync: no memory traffic in the loop.
extern "C" __global__ void mma_peak(float* out, int iters) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FRAGS];
    wmma::fill_fragment(a, __float2half(0.001f * (threadIdx.x & 7)));
    wmma::fill_fragment(b, __float2half(0.002f));
    // Distinct starting values: identical accumulators could be merged by the compiler
    // into one chain, and the count of mma_sync actually issued would fall.
#pragma unroll
    for (int f = 0; f < FRAGS; ++f) wmma::fill_fragment(acc[f], 0.5f * f + 0.25f * blockIdx.x);
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int f = 0; f < FRAGS; ++f) wmma::mma_sync(acc[f], a, b, acc[f]);
    }
    // Every element is used: with only some of them live, the compiler drops the
    // mma.sync instructions that produce the others (one 16x16x16 WMMA is two of them).
    float s = 0.0f;
#pragma unroll
    for (int f = 0; f < FRAGS; ++f)
#pragma unroll
        for (int e = 0; e < acc[f].num_elements; ++e) s += acc[f].x[e];
    if (s == 12345.0f) out[0] = s;  // keeps the work alive; never true
}
"""


def mma_peak() -> None:
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    out = cp.zeros(1, dtype=cp.float32)
    iters = 4096
    for frags in (4, 8):
        for warps in (4, 8):
            for per_sm in (1, 2, 4):

                def run(frags: int = frags, warps: int = warps,
                        per_sm: int = per_sm) -> dict[str, Any]:  # fmt: skip
                    k = build(MMA_PEAK, "mma_peak", {"FRAGS": frags})
                    blocks = sms * per_sm
                    us = timed(lambda: k((blocks,), (32 * warps,), (out, np.int32(iters))))
                    flops = 2.0 * 16 * 16 * 16 * frags * iters * warps * blocks
                    return dict(us=round(us, 1), tflops=round(flops / us / 1e6, 1), res=regs(k))

                attempt("mma_peak", f"FRAGS={frags},warps/block={warps},blocks/SM={per_sm}", run)
