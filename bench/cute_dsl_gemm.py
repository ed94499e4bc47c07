"""The CuTe DSL GEMM of bench/cute_dsl_gemm_kernel.py beside cuBLAS, or compiled only.

    python bench/cute_dsl_gemm.py                    # on an H100/H200: 4096^3
    python bench/cute_dsl_gemm.py --big              # 4096^3 and 8192^3
    python bench/cute_dsl_gemm.py --compile-only     # no GPU: build the sm_90a cubin only

On a GPU the script builds A (M x K) and B (K x N) row-major bf16 with torch, compiles the
kernel with cute.compile (its own @cute.jit host code builds the TMA descriptors, the DSL's
JIT launches it), checks C against torch.matmul in fp32 (max relative error), and times it
with CUDA events, median of --reps runs, each after a read-only sweep of 256 MiB that
flushes the L2. Beside it: torch.matmul on bf16 (bf16 out: the "cuBLAS" row the bar is
measured against) and, where torch offers it, torch.mm(..., out_dtype=torch.float32)
(bf16 in, fp32 out). B is passed as it is (K x N, row-major), not transposed. Results go
to bench/results/cute_dsl_gemm_<gpu>_<out>_b<major>.json.

Without a GPU, --compile-only stops the DSL where it would build its host JIT engine (which
needs the CUDA driver), as kernels/backends/cute_dsl.py does, and reports the cubin.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
RESULTS = Path(__file__).resolve().parent / "results"


class _Captured(Exception):
    """Raised from the DSL's JIT step: the compiled module is all compile-only wants."""


def _gemm(args, m: int, n: int, k: int, ctas: int):
    import cutlass
    from cute_dsl_gemm_kernel import HopperGemm

    out = cutlass.BFloat16 if args.out == "bf16" else cutlass.Float32
    return HopperGemm(m, n, k, out_dtype=out, b_major=args.b_major, stages=args.stages, ctas=ctas)


def compile_only(args, size: int) -> dict:
    """Compile for sm_90a with stand-in pointers; return the cubin's size and the time."""
    import cuda.bindings.driver as cuda
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_ptr
    from cutlass.cutlass_dsl import CuTeDSL

    dsl = CuTeDSL._get_dsl()
    dsl.envar.arch = os.environ["CUTE_DSL_ARCH"]
    out = cutlass.BFloat16 if args.out == "bf16" else cutlass.Float32
    gmem = cute.AddressSpace.gmem
    ptrs = [make_ptr(t, 16, gmem, assumed_align=16) for t in (cutlass.BFloat16,) * 2 + (out,)]
    captured: dict = {}
    jit = dsl.compiler_provider.jit

    def capture(module, *a, **kw):
        captured["module"], captured["symbols"] = module, list(dsl.kernel_symbols)[-1:]
        raise _Captured

    dsl.compiler_provider.jit = capture
    start = time.perf_counter()
    try:
        cute.compile(_gemm(args, size, size, size, 132), *ptrs, cuda.CUstream(0))
    except Exception:
        if "module" not in captured:
            raise
    finally:
        dsl.compiler_provider.jit = jit
        dsl.post_compilation_cleanup()
    seconds = time.perf_counter() - start
    cubins = []

    def visit(op):
        if op.name == "gpu.binary":
            text = str(op).encode()
            cubins.append(_unescape(text[text.index(b'bin = "') + 7 : text.rindex(b'"')]))
        return ir.WalkResult.ADVANCE

    from cutlass._mlir import ir

    captured["module"].operation.walk(visit)
    if args.cubin:
        Path(args.cubin).write_bytes(cubins[0])
    return {
        "size": size,
        "compile_s": round(seconds, 2),
        "kernels": captured["symbols"],
        "cubin_bytes": [len(c) for c in cubins],
    }


def _unescape(blob: bytes) -> bytes:
    """The bytes of a gpu.binary's `bin = "..."`: \\XX hex escapes and \\\\."""
    out, i = bytearray(), 0
    while i < len(blob):
        if blob[i] == 0x5C and blob[i + 1 : i + 2] == b"\\":
            out.append(0x5C)
            i += 2
        elif blob[i] == 0x5C:
            out += bytes.fromhex(blob[i + 1 : i + 3].decode())
            i += 3
        else:
            out.append(blob[i])
            i += 1
    return bytes(out)


def _flush(buf) -> None:
    buf.sum()  # reads 256 MiB: evicts A, B and C from the 50-60 MiB L2


def _time(fn, reps: int, flush) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        _flush(flush)
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end))
    return statistics.median(times)


def _check(c, ref, tile: tuple[int, int], tol: float = 1e-2) -> dict:
    """Max relative error (to the largest |ref|) and, where elements are unwritten (NaN) or
    off by more than tol, how many and where, by position inside the kernel's tile, so that
    a wrong epilogue map or a skipped stage shows its pattern."""
    import torch

    tm, tn = tile
    scale = ref.abs().max()
    diff = (c - ref).abs() / scale
    unwritten = torch.isnan(c)
    bad = unwritten | (diff > tol)
    out = {
        "max_rel_err": diff[~unwritten].max().item() if (~unwritten).any() else float("nan"),
        "unwritten": int(unwritten.sum().item()),
        "wrong": int((bad & ~unwritten).sum().item()),
        "elements": c.numel(),
    }
    if bad.any():
        rows, cols = bad.nonzero(as_tuple=True)
        out["first_bad"] = [int(rows[0]), int(cols[0])]
        in_row, in_col = (rows % tm).unique(), (cols % tn).unique()
        out["bad_rows_in_tile"] = in_row.tolist()[:16]
        out["bad_cols_in_tile"] = in_col.tolist()[:16]
        out["bad_row_count_in_tile"] = in_row.numel()
        out["bad_col_count_in_tile"] = in_col.numel()
        tiles_n = -(-c.shape[1] // tn)
        tiles = ((rows // tm) * tiles_n + cols // tn).unique().tolist()
        out["bad_tiles"] = len(tiles)
        out["bad_tile_coords"] = [[t // tiles_n, t % tiles_n] for t in tiles[:32]]
    return out


def run_gpu(args, size: int) -> dict:
    """Compile, check and time one size against cuBLAS on the current GPU."""
    import cuda.bindings.driver as cuda
    import cutlass
    import cutlass.cute as cute
    import torch
    from cutlass.cute.runtime import make_ptr

    m = n = k = size
    torch.manual_seed(size)
    a = (torch.rand(m, k, device="cuda") * 2 - 1).to(torch.bfloat16)
    b = (torch.rand(k, n, device="cuda") * 2 - 1).to(torch.bfloat16)
    b_op = b if args.b_major == "n" else b.t().contiguous()  # "k": transposed once, untimed
    c_dtype = torch.bfloat16 if args.out == "bf16" else torch.float32
    c = torch.empty(m, n, device="cuda", dtype=c_dtype)
    gmem = cute.AddressSpace.gmem
    out_t = cutlass.BFloat16 if args.out == "bf16" else cutlass.Float32
    ptrs = (
        make_ptr(cutlass.BFloat16, a.data_ptr(), gmem, assumed_align=16),
        make_ptr(cutlass.BFloat16, b_op.data_ptr(), gmem, assumed_align=16),
        make_ptr(out_t, c.data_ptr(), gmem, assumed_align=16),
    )
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    start = time.perf_counter()
    compiled = cute.compile(_gemm(args, m, n, k, sms), *ptrs, stream)
    compile_s = time.perf_counter() - start

    c.fill_(float("nan"))  # an element the kernel does not write stays NaN
    compiled(*ptrs, stream)
    torch.cuda.synchronize()
    ref = a.float() @ b.float()
    from cute_dsl_gemm_kernel import TILE_M, TILE_N

    check = _check(c.float(), ref, (TILE_M, TILE_N))
    if check["unwritten"]:
        # NaN where a tile was computed from garbage, or never stored: a second launch into
        # C filled with 7 tells them apart.
        c.fill_(7.0)
        compiled(*ptrs, stream)
        torch.cuda.synchronize()
        check["still_7_after_refill"] = int((c == 7.0).sum().item())
        check["nan_after_refill"] = int(torch.isnan(c.float()).sum().item())
    err = check["max_rel_err"]

    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    flops = 2.0 * m * n * k
    rows = {"cute_dsl": _time(lambda: compiled(*ptrs, stream), args.reps, flush)}
    rows["cublas_bf16"] = _time(lambda: torch.matmul(a, b), args.reps, flush)
    try:
        torch.mm(a, b, out_dtype=torch.float32)
        rows["cublas_bf16_f32out"] = _time(
            lambda: torch.mm(a, b, out_dtype=torch.float32), args.reps, flush
        )
    except (TypeError, RuntimeError):
        pass  # this torch has no out_dtype
    return {
        "size": size,
        "out": args.out,
        "b_major": args.b_major,
        "stages": args.stages,
        "ctas": min(sms, (m // 128) * (n // 256)),
        "compile_s": round(compile_s, 2),
        "max_rel_err": err,
        "check": check,
        "ms": {key: round(v, 4) for key, v in rows.items()},
        "tflops": {key: round(flops / v / 1e9, 1) for key, v in rows.items()},
        "percent_of_cublas_bf16": round(100 * rows["cublas_bf16"] / rows["cute_dsl"], 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--compile-only", action="store_true", help="no GPU: build only")
    parser.add_argument("--big", action="store_true", help="also 8192^3")
    parser.add_argument("--out", choices=("bf16", "f32"), default="bf16")
    parser.add_argument("--b-major", choices=("n", "k"), default="n")
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--cubin", help="with --compile-only: write the cubin here")
    args = parser.parse_args()
    sizes = [4096, 8192] if args.big else [4096]
    if args.compile_only:
        for size in sizes:
            print(json.dumps(compile_only(args, size)))
        return 0
    import torch

    gpu = torch.cuda.get_device_name(0)
    results = [run_gpu(args, size) for size in sizes]
    print(f"\n{gpu}, torch {torch.__version__}, out={args.out}, B {args.b_major}-major\n")
    print("| size | kernel | ms | TFLOP/s | % of cuBLAS bf16 | max rel err | compile s |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        for key, ms in r["ms"].items():
            pct = round(100 * r["ms"]["cublas_bf16"] / ms, 1)
            own = key == "cute_dsl"
            err = f"{r['max_rel_err']:.2e}" if own else ""
            cs = r["compile_s"] if own else ""
            print(f"| {r['size']} | {key} | {ms} | {r['tflops'][key]} | {pct} | {err} | {cs} |")
    for r in results:
        print(f"check at {r['size']}: {json.dumps(r['check'])}")
    RESULTS.mkdir(exist_ok=True)
    slug = gpu.replace("NVIDIA ", "").replace(" ", "_").lower()
    path = RESULTS / f"cute_dsl_gemm_{slug}_{args.out}_b{args.b_major}.json"
    path.write_text(json.dumps({"gpu": gpu, "torch": torch.__version__, "results": results}))
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
