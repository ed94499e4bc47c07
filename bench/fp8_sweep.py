"""Block-scaled FP8 GEMM in Triton: a sweep of tile shapes and schedules against cuBLAS FP8.

gemm_fp8's contract (A_q M x K and B_q N x K in float8_e4m3fn, fp32 scales per 1 x 128 block
of A and per 128 x 128 block of B, C in bf16), on one GPU. The kernel here is the problem's
block-scaled solution made general in two ways:

- BLOCK_N may be any multiple of 128: the scales of B then form a vector along the tile's
  columns (one per 128 of them), and each K step multiplies the partial product by the
  outer product of A's row scales and that vector;
- PERSISTENT launches one program per SM that walks the tiles (grouped raster), so the next
  tile's loads start while the last one's epilogue runs.

Every variant is checked against an fp32 product of the dequantised operands before it is
timed (triton.testing.do_bench, median, L2 cleared before each rep). Beside them, on the same
fp8 bytes: torch._scaled_mm with per-tensor scales (the problem's baseline, with and without
cuBLAS's fast accumulation) and, where this torch takes them, with the same block scales.

    python bench/fp8_sweep.py --size 4096 --json bench/results/fp8_sweep_<gpu>.json
    python bench/fp8_sweep.py --cpu-check     # Triton's interpreter, small sizes, no timing
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# (BLOCK_M, BLOCK_N, num_warps, num_stages, persistent[, warp-specialised K loop])
CONFIGS = [
    (128, 128, 8, 3, False),
    (128, 128, 8, 4, False),
    (128, 128, 4, 4, False),
    (128, 128, 8, 5, False),
    (64, 128, 4, 4, False),
    (128, 256, 8, 3, False),
    (128, 256, 8, 4, False),
    (256, 128, 8, 3, False),
    (64, 256, 4, 4, False),
    (128, 128, 8, 4, True),
    (128, 128, 4, 4, True),
    (128, 256, 8, 3, True),
    (256, 128, 8, 3, True),
    (64, 256, 4, 4, True),
    (128, 128, 4, 4, False, True),
    (128, 128, 8, 4, False, True),
    (128, 128, 4, 4, True, True),
    # SCALE 1: the accumulator rescaled in place (bench/fp8_sweep_kernel.py)
    (128, 128, 8, 3, False, False, 1),
    (128, 128, 8, 2, False, False, 1),
    (128, 128, 8, 4, True, False, 1),
    (128, 256, 8, 3, False, False, 1),
    (128, 256, 8, 4, True, False, 1),
    (256, 128, 8, 3, True, False, 1),
    # SCALE 3: the promotion of one step overlapped with the next step's product
    (128, 128, 8, 4, False, False, 3),
    (128, 128, 8, 4, True, False, 3),
    (128, 128, 8, 3, True, False, 3),
    (64, 128, 4, 4, True, False, 3),
    # SCALE 2: one scale per tensor, the ceiling of Triton's FP8 dot (not the contract)
    (128, 128, 8, 4, True, False, 2),
    (128, 256, 8, 3, False, False, 2),
    (128, 256, 8, 4, True, False, 2),
]
SCALE_NAMES = {0: "", 1: " rescaled-acc", 2: " per-tensor ceiling", 3: " overlapped"}


def _tg() -> Any:
    """bench/triton_gemms.py, for its fp8 inputs, references and errors."""
    spec = importlib.util.spec_from_file_location(
        "triton_gemms", ROOT / "bench" / "triton_gemms.py"
    )
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def build_kernel() -> Any:
    sys.path.insert(0, str(ROOT / "bench"))
    from fp8_sweep_kernel import gemm_fp8_sweep

    return gemm_fp8_sweep


def _allocator() -> None:
    import torch
    import triton

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    triton.set_allocator(
        lambda size, align, stream: torch.empty(size, dtype=torch.int8, device=dev)
    )


def variant_rows(x: dict[str, Any], m: int, n: int, k: int, timer: Any, interpreted: bool,
                 only: set[int] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    import torch

    tg = _tg()
    kernel = build_kernel()
    sms = torch.cuda.get_device_properties(0).multi_processor_count if not interpreted else 2
    rows = []
    for bm, bn, warps, stages, persistent, *rest in CONFIGS:
        ws = bool(rest and rest[0])
        scale = rest[1] if len(rest) > 1 else 0
        if n % bn or (only is not None and scale not in only):
            continue
        name = f"{bm}x{bn}x128 w{warps} s{stages}"
        name += (" persistent" if persistent else "") + (" ws" if ws else "")
        name += SCALE_NAMES[scale]
        row: dict[str, Any] = {"kernel": name, "BLOCK_M": bm, "BLOCK_N": bn, "num_warps": warps,
                               "num_stages": stages, "persistent": persistent,
                               "scale_mode": scale}  # fmt: skip
        tiles = -(-m // bm) * (n // bn)
        grid = (min(tiles, sms),) if persistent else (tiles,)
        c = torch.full((m, n), float("nan"), device=x["A"].device, dtype=torch.bfloat16)

        opts = {"BLOCK_M": bm, "BLOCK_N": bn, "PERSISTENT": persistent, "WS": ws,
                "SCALE": scale, "num_warps": warps, "num_stages": stages}  # fmt: skip

        def call(grid: tuple[int, ...] = grid, c: Any = c, opts: dict[str, Any] = opts) -> Any:
            kernel[grid](x["A"], x["B"], x["a_scale"], x["b_scale"], c, m, n, k,
                         BLOCK_K=128, GROUP_M=8, NUM_PROGS=grid[0], **opts)  # fmt: skip
            return c

        try:
            ref = x["ref"] if scale != 2 else x["ref_tensor"]
            row.update(tg.errors(call(), ref))
            row["correct"] = bool(row["max_abs_err"] <= 0.125 + 0.0078125 * float(ref.abs().max()))
            if timer is not None and row["correct"]:
                row["ms"] = timer(call)
        except Exception as exc:  # out of shared memory, a compile error: on its row
            row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        rows.append(row)
    return rows


def baseline_rows(x: dict[str, Any], timer: Any) -> list[dict[str, Any]]:
    import torch

    rows = []
    one = torch.ones((), device="cuda")
    for fast in (False, True):

        def scaled(fast: bool = fast) -> Any:
            return torch._scaled_mm(x["A"], x["B"].t(), scale_a=one, scale_b=one,
                                    out_dtype=torch.bfloat16, use_fast_accum=fast)  # fmt: skip

        name = f"torch._scaled_mm per-tensor{' fast-accum' if fast else ''}"
        rows.append({"kernel": name, "ms": timer(scaled), "baseline": not fast})
    # The same block scales, where cuBLAS (12.9+) and this torch accept them: A's as
    # (M, K/128) and B's as (K/128, N/128), each in the layout torch asks for.
    a_s = x["a_scale"]
    b_s = x["b_scale"]
    tries = {
        "outer-major": (a_s.t().contiguous().t(), b_s.t()),
        "row-major": (a_s.contiguous(), b_s.t().contiguous()),
    }
    for label, (sa, sb) in tries.items():
        row: dict[str, Any] = {"kernel": f"torch._scaled_mm block-scaled ({label})"}
        try:

            def blockwise(sa: Any = sa, sb: Any = sb) -> Any:
                return torch._scaled_mm(x["A"], x["B"].t(), scale_a=sa, scale_b=sb,
                                        out_dtype=torch.bfloat16)  # fmt: skip

            row.update(_tg().errors(blockwise(), x["ref"]))
            row["ms"] = timer(blockwise)
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--rep-ms", type=int, default=200)
    p.add_argument("--cpu-check", action="store_true")
    p.add_argument("--json", type=Path)
    p.add_argument(
        "--scale-modes",
        default="0,1,2,3",
        help="the kernel's SCALE modes to run (bench/fp8_sweep_kernel.py)",
    )
    args = p.parse_args(argv)
    only = {int(v) for v in args.scale_modes.split(",")}
    if args.cpu_check:
        os.environ["TRITON_INTERPRET"] = "1"
    import torch
    import triton

    _allocator()
    tg = _tg()
    if args.cpu_check:
        m, n, k = 130, 256, 384
        x = _with_tensor_ref(tg.fp8_inputs(m, n, k, "cpu", seed=3), only)
        rows = variant_rows(x, m, n, k, None, True, only)
        device = "cpu (interpreter)"
    else:
        torch.backends.cuda.matmul.allow_tf32 = False
        s = args.size
        m = n = k = s
        x = _with_tensor_ref(tg.fp8_inputs(s, s, s, "cuda", seed=s + 1), only)

        def timer(fn: Any) -> float:
            return float(triton.testing.do_bench(fn, rep=args.rep_ms, return_mode="median"))

        rows = baseline_rows(x, timer) + variant_rows(x, s, s, s, timer, False, only)
        device = torch.cuda.get_device_name()
        base = next(r["ms"] for r in rows if r.get("baseline"))
        for r in rows:
            if "ms" in r:
                r["tflops"] = round(2 * m * n * k / r["ms"] / 1e9, 1)
                r["pct_of_baseline"] = round(100 * base / r["ms"], 1)
    for r in rows:
        print(json.dumps(r))
    if args.json:
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        setup = {"when": when, "device": device, "torch": torch.__version__,
                 "triton": triton.__version__, "size": [m, n, k]}  # fmt: skip
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"setup": setup, "rows": rows}, indent=2) + "\n")
    return 0 if all(r.get("correct", True) for r in rows) else 1


def _with_tensor_ref(x: dict[str, Any], only: set[int]) -> dict[str, Any]:
    """Adds `ref_tensor`, where SCALE 2 runs: the same fp8 values with one scale per tensor
    (each operand's first block scale), the reference of that mode."""
    if 2 not in only:
        return x
    one = x["a_scale"].flatten()[0] * x["b_scale"].flatten()[0]
    x["ref_tensor"] = (x["A"].float() @ x["B"].float().T) * one
    return x


if __name__ == "__main__":
    sys.exit(main())
