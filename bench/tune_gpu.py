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
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ["CUPY_TF32"] = "0"
os.environ["NVIDIA_TF32_OVERRIDE"] = "0"

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

PROBLEMS = ROOT / "kernels" / "problems"
SGEMM = PROBLEMS / "sgemm" / "solutions" / "correct" / "gemm_07_warptile.cu"
WMMA = PROBLEMS / "hgemm_wmma" / "solutions" / "correct" / "hgemm_wmma_pipelined.cu"
WMMA_CLUSTER = PROBLEMS / "hgemm_wmma" / "solutions" / "correct" / "hgemm_wmma_cluster.cu"
TRANSPOSE = PROBLEMS / "transpose" / "solutions" / "correct" / "transpose_tiled_padded.cu"
REDUCE = PROBLEMS / "sum" / "solutions" / "correct" / "reduce_sum_shuffle_float4.cu"


# ------------------------------------------------------------------ compiling and timing


def build(path_or_src: Path | str, name: str, defines: dict[str, Any]) -> Any:
    from kplay.kernels.backends.cuda import _NVRTC_OPTIONS
    from kplay.kernels.backends.toolkit_find import find_cuda_include

    src = path_or_src.read_text() if isinstance(path_or_src, Path) else path_or_src
    head = "".join(f"#define {k} {v}\n" for k, v in defines.items())
    include = find_cuda_include()
    options = _NVRTC_OPTIONS + ((f"-I{include}",) if include else ())
    module = cp.RawModule(code=head + src, options=options, backend="nvrtc")
    return module.get_function(name)


def timed(launch: Callable[[], None], before_rep: Callable[[], None] | None = None) -> float:
    """Median microseconds of `launch` by the engine's own timer (L2 flushed before each rep)."""
    from kplay.kernels import timing

    stage = timing.time_gpu(launch, before_rep, cap_s=0.5)
    assert stage.median_us is not None
    return float(stage.median_us)


def regs(kernel: Any) -> str:
    a = kernel.attributes
    return f"{a['num_regs']} regs, {a['local_size_bytes']} B local"


ROWS: list[dict[str, Any]] = []


def record(section: str, variant: str, **fields: Any) -> None:
    row = {"section": section, "variant": variant, **fields}
    ROWS.append(row)
    print(" | ".join([section, variant] + [f"{k}={v}" for k, v in fields.items()]), flush=True)


def attempt(section: str, variant: str, fn: Callable[[], dict[str, Any]]) -> None:
    try:
        record(section, variant, **fn())
    except Exception as exc:  # noqa: BLE001 - a variant that fails to build is a result too
        record(section, variant, error=str(exc).splitlines()[0][:200])


class GemmCase:
    """A 4096^3 product and small edge products, with references, for variants.

    The edges are 257 x 300 @ 300 x 129 (unaligned rows: every block takes the checked
    path) and 384 x 200 @ 200 x 264 (aligned: inner blocks take the unchecked path for
    all but a last, partial K-slice)."""

    def __init__(self, a: Any, b: Any, ref: Any, edges: list[tuple[Any, Any]], base_us: float):
        self.a, self.b, self.ref = a, b, ref
        self.edges = [(x, y, x.astype(cp.float32) @ y.astype(cp.float32)) for x, y in edges]
        self.c = cp.empty(ref.shape, dtype=cp.float32)
        self.base_us = base_us
        self.flops = 2.0 * a.shape[0] * b.shape[1] * a.shape[1]

    def measure(
        self, k: Any, d: dict[str, int], tol: float, edge_tol: float, smem: int = 0
    ) -> dict[str, Any]:
        """Check kernel `k` (launched from the macros `d`) on both products, then time it."""

        def launch(x: Any, y: Any, z: Any) -> None:
            m, kk, nn = x.shape[0], x.shape[1], y.shape[1]
            grid = gemm_grid(d, m, nn)
            args = (x, y, z, np.int32(m), np.int32(nn), np.int32(kk))
            k(grid, (d["NTHREADS"],), args, shared_mem=smem)

        edge_err = 0.0
        for x, y, ref in self.edges:
            ec = cp.full(ref.shape, cp.nan, dtype=cp.float32)  # unwritten elements fail
            launch(x, y, ec)
            edge_err = max(edge_err, float(cp.nan_to_num(cp.abs(ec - ref), nan=cp.inf).max()))
        self.c.fill(0)
        us = timed(lambda: launch(self.a, self.b, self.c))
        err = float(cp.abs(self.c - self.ref).max())
        return dict(ok=err < tol and edge_err < edge_tol, us=round(us, 1),
                    tflops=round(self.flops / us / 1e6, 2),
                    pct_cublas=round(100 * self.base_us / us, 1), err=f"{err:.1e}",
                    res=regs(k))  # fmt: skip


def gemm_grid(d: dict[str, int], m: int, n: int) -> tuple[int, int]:
    """Blocks along N and M for a GEMM kernel built with macros `d`; with CLUSTER > 1 the
    y extent is rounded up to whole clusters (a cluster's blocks stack along M)."""
    cl = d.get("CLUSTER", 1)
    return (n + d["BN"] - 1) // d["BN"], (m + d["BM"] * cl - 1) // (d["BM"] * cl) * cl


def wmma_smem_bytes(d: dict[str, int]) -> int:
    """Dynamic shared memory of hgemm_wmma_pipelined.cu built with macros `d` (its STAGES
    ring of padded A and B slices, 8 halves of padding a row)."""
    return d["STAGES"] * (d["BM"] * (d["BK"] + 8) + d["BK"] * (d["BN"] + 8)) * 2


def edge_inputs(rng: Any, dtype: Any) -> list[tuple[Any, Any]]:
    pairs = []
    for m, k, n in ((257, 300, 129), (384, 200, 264)):
        x = rng.uniform(-1, 1, (m, k)).astype(dtype)
        y = rng.uniform(-1, 1, (k, n)).astype(dtype)
        pairs.append((cp.asarray(x), cp.asarray(y)))
    return pairs


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


# ------------------------------------------------------------------ WMMA


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
