"""The Triton GEMMs of gemm_bf16 and gemm_fp8 against cuBLAS, in one GPU call.

Times, with triton.testing.do_bench (median of its repetitions, L2 cleared before each) and
the same inputs for every row of a size:

- bf16, C fp32 (the gemm_bf16 contract): cuBLAS through torch (torch.mm with
  out_dtype=float32, or bf16 out where this torch has no such overload: the JSON says
  which), the tiled and the persistent Triton solutions, at 4096^3 and 8192^3;
- FP8 e4m3, C bf16 (the gemm_fp8 contract): torch._scaled_mm with per-tensor scales on
  the same fp8 bytes (cuBLAS; with and without its fast accumulation), and the
  block-scaled Triton solution, whose error against an fp32 reference of the dequantised
  operands is also given (max abs, relative Frobenius).

Every Triton row is launched the way its kplay: line says (grid, constants, num_warps,
num_stages), read from the solution file in the repository, and its output is checked
before it is timed. Needs only torch and triton.

    python bench/triton_gemms.py --json out.json              # on an H100/H200
    python bench/triton_gemms.py --bf16-sizes 4096 --fp8-sizes 4096
    python bench/triton_gemms.py --cpu-check                  # no GPU: Triton's interpreter

--cpu-check runs every launch of the bench once, at small sizes in Triton's interpreter on
the CPU, against the same references, and times nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ROOT / "kernels" / "problems"
SOLUTIONS = {
    "triton tiled": PROBLEMS / "gemm_bf16" / "solutions" / "correct" / "gemm_bf16_tiled.triton.py",
    "triton persistent": PROBLEMS
    / "gemm_bf16"
    / "solutions"
    / "correct"
    / "gemm_bf16_persistent.triton.py",
    "triton blockscaled": PROBLEMS
    / "gemm_fp8"
    / "solutions"
    / "correct"
    / "gemm_fp8_blockscaled.triton.py",
}
KERNEL_NAMES = {"triton tiled": "gemm_bf16", "triton persistent": "gemm_bf16",
                "triton blockscaled": "gemm_fp8"}  # fmt: skip
SCALE_BLOCK = 128  # gemm_fp8's scale blocks: 1x128 of A, 128x128 of B
FP8_MAX = 448.0  # the largest float8_e4m3fn
# --cpu-check's (M, N, K): partial tiles in M and N, a K tail for bf16; FP8 keeps N and K
# multiples of 128, as gemm_fp8 does.
CPU_BF16 = ((129, 264, 72), (300, 520, 200))
CPU_FP8 = ((129, 256, 384), (1, 128, 128))
_DIRECTIVE = re.compile(r"^\s*#\s*kplay:\s*(?P<body>.*)$", re.MULTILINE)


# ------------------------------------------------------------------ solutions


class Launch:
    """A solution's kernel and its kplay: line: grid formula, constants, warps, stages."""

    def __init__(self, name: str, path: Path) -> None:
        self.name = name
        self.path = path
        source = path.read_text()
        match = _DIRECTIVE.search(source)
        if match is None:
            raise SystemExit(f"{path}: no '# kplay:' line to read the launch from")
        self.grid: list[str] = []
        self.constants: dict[str, int] = {}
        self.options: dict[str, int] = {}
        for token in match.group("body").split():
            key, _, value = token.partition("=")
            if key == "grid":
                self.grid = _split_grid(value)
            elif key in ("num_warps", "num_stages"):
                self.options[key] = int(value)
            else:
                self.constants[key] = int(value)
        if not self.grid:
            raise SystemExit(f"{path}: the kplay: line gives no grid")
        self.module: ModuleType | None = None

    def load(self) -> Any:
        """Import the solution file (its name holds dots: by path) and return its kernel."""
        if self.module is None:
            spec = importlib.util.spec_from_file_location(f"_bench_{self.path.stem}", self.path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self.module = module
        return getattr(self.module, KERNEL_NAMES[self.name])

    def grid_for(self, params: dict[str, int]) -> tuple[int, ...]:
        env = {**params, **self.constants, "ceil_div": lambda a, b: -(-a // b),
               "min": min, "max": max}  # fmt: skip
        return tuple(int(eval(g, {"__builtins__": {}}, env)) for g in self.grid)  # noqa: S307

    def run(self, args: list[Any], params: dict[str, int], interpreted: bool) -> None:
        kwargs: dict[str, Any] = dict(self.constants)
        if not interpreted:  # the interpreter has no warps or stages
            kwargs.update(self.options)
        self.load()[self.grid_for(params)](*args, **kwargs)


def _split_grid(value: str) -> list[str]:
    inner = value[1:-1] if value.startswith("(") and value.endswith(")") else value
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    return [p.strip() for p in [*parts, cur] if p.strip()]


def launches() -> dict[str, Launch]:
    return {name: Launch(name, path) for name, path in SOLUTIONS.items()}


# ------------------------------------------------------------------ inputs


def bf16_inputs(m: int, n: int, k: int, device: str, seed: int) -> dict[str, Any]:
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    a = (torch.rand((m, k), generator=gen, device=device) * 2 - 1).to(torch.bfloat16)
    b = (torch.rand((k, n), generator=gen, device=device) * 2 - 1).to(torch.bfloat16)
    return {"A": a, "B": b, "ref": a.float() @ b.float()}


def quantise(x: Any, rows: int) -> tuple[Any, Any]:
    """x (R x K) as float8_e4m3fn in blocks of rows x 128, each scaled so that its largest
    magnitude becomes 448: (x_q, scales of shape (R / rows, K / 128))."""
    import torch

    r, k = x.shape
    blocks = x.reshape(r // rows, rows, k // SCALE_BLOCK, SCALE_BLOCK)
    amax = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-12)
    scale = (amax / FP8_MAX).float()
    # Clamped: the largest element divided by its scale may round to just above 448.
    q = (blocks / scale[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.reshape(r, k), scale


def dequantise(q: Any, scale: Any, rows: int) -> Any:
    r, k = q.shape
    blocks = q.float().reshape(r // rows, rows, k // SCALE_BLOCK, SCALE_BLOCK)
    return (blocks * scale[:, None, :, None]).reshape(r, k)


def fp8_inputs(m: int, n: int, k: int, device: str, seed: int) -> dict[str, Any]:
    """gemm_fp8's operands: A (M x K) and B (N x K, K-major) from normal draws, scaled
    per 1x128 block of A and per 128x128 block of B; `ref` in fp32 from the dequantised
    values (TF32 off)."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn((m, k), generator=gen, device=device)
    b = torch.randn((n, k), generator=gen, device=device)
    a_q, a_scale = quantise(a, 1)
    b_q, b_scale = quantise(b, SCALE_BLOCK)
    ref = dequantise(a_q, a_scale, 1) @ dequantise(b_q, b_scale, SCALE_BLOCK).T
    return {"A": a_q, "B": b_q, "a_scale": a_scale, "b_scale": b_scale, "ref": ref}


def errors(got: Any, ref: Any) -> dict[str, float]:
    diff = got.float() - ref
    return {
        "max_abs_err": float(diff.abs().max()),
        "rel_frobenius_err": float(diff.norm() / ref.norm()),
    }


# ------------------------------------------------------------------ the rows


def bf16_rows(m: int, n: int, k: int, runs: dict[str, Launch], device: str,
              timer: Any) -> list[dict[str, Any]]:  # fmt: skip
    import torch

    x = bf16_inputs(m, n, k, device, seed=m)
    params = {"M": m, "N": n, "K": k}
    rows = []
    if timer is not None:
        cublas, variant = _cublas_bf16(x["A"], x["B"])
        rows.append(_row(f"cuBLAS bf16 ({variant})", "bf16", params, cublas, x["ref"], timer))
    for name in ("triton tiled", "triton persistent"):
        c = torch.full((m, n), float("nan"), device=device)
        launch = runs[name]

        def call(launch: Launch = launch, c: Any = c) -> Any:
            launch.run([x["A"], x["B"], c, m, n, k], params, timer is None)
            return c

        rows.append(_row(name, "bf16", params, call, x["ref"], timer))
    return rows


def fp8_rows(m: int, n: int, k: int, runs: dict[str, Launch], device: str,
             timer: Any) -> list[dict[str, Any]]:  # fmt: skip
    import torch

    x = fp8_inputs(m, n, k, device, seed=m + 1)
    params = {"M": m, "N": n, "K": k}
    rows = []
    if timer is not None:
        one = torch.ones((), device=device)
        for fast in (False, True):

            def scaled(fast: bool = fast) -> Any:
                out = torch._scaled_mm(x["A"], x["B"].t(), scale_a=one, scale_b=one,
                                       out_dtype=torch.bfloat16, use_fast_accum=fast)  # fmt: skip
                return out[0] if isinstance(out, tuple) else out  # torch < 2.4: (out, amax)

            label = f"torch._scaled_mm per-tensor{' fast-accum' if fast else ''}"
            # Per-tensor scales of 1: the time is what counts; its error is not comparable.
            rows.append(_row(label, "fp8", params, scaled, None, timer))
    c = torch.full((m, n), float("nan"), device=device, dtype=torch.bfloat16)
    launch = runs["triton blockscaled"]

    def call() -> Any:
        launch.run([x["A"], x["B"], x["a_scale"], x["b_scale"], c, m, n, k], params,
                   timer is None)  # fmt: skip
        return c

    rows.append(_row("triton blockscaled", "fp8", params, call, x["ref"], timer))
    return rows


def _cublas_bf16(a: Any, b: Any) -> tuple[Any, str]:
    import torch

    try:
        torch.mm(a[:16, :16], b[:16, :16], out_dtype=torch.float32)
        return (lambda: torch.mm(a, b, out_dtype=torch.float32)), "fp32 out"
    except (TypeError, RuntimeError, NotImplementedError):
        return (lambda: torch.mm(a, b)), "bf16 out"


def _row(name: str, kind: str, params: dict[str, int], fn: Any, ref: Any,
         timer: Any) -> dict[str, Any]:  # fmt: skip
    """One kernel's row: run once and checked against `ref`, then timed. A kernel that
    fails (out of shared memory on this device, a launch error) gets its error on its row
    and the others still run."""
    m, n, k = params["M"], params["N"], params["K"]
    row: dict[str, Any] = {"kernel": name, "kind": kind, "size": f"{m}x{n}x{k}", **params}
    try:
        out = fn()
        if ref is not None:
            row.update(errors(out, ref))
            # fp32 out: bf16 products are exact, only the fp32 sums differ; a bf16 output
            # adds its rounding (up to 2^-9 of each element).
            limit = 1e-2 if str(out.dtype) == "torch.bfloat16" else 1e-3
            finite = math.isfinite(row["max_abs_err"])
            row["correct"] = bool(finite and row["rel_frobenius_err"] < limit)
        if timer is not None:
            ms = timer(fn)
            row["ms"] = ms
            row["tflops"] = 2.0 * m * n * k / (ms * 1e-3) / 1e12
    except Exception as exc:  # noqa: BLE001 - reported on the row; the other rows still run
        first = (str(exc).strip().splitlines() or [""])[0]
        row["error"] = f"{type(exc).__name__}: {first}"[:300]
        row["correct"] = False
    return row


def add_shares(rows: list[dict[str, Any]]) -> None:
    """% of each size's baseline: cuBLAS bf16, or _scaled_mm without fast accumulation."""
    for row in rows:
        same = [r for r in rows if r["size"] == row["size"] and r["kind"] == row["kind"]]
        base = next((r for r in same if _is_baseline(r)), None)
        if base is not None and "ms" in row and "ms" in base:
            row["percent_of_baseline"] = 100.0 * base["ms"] / row["ms"]
            row["baseline"] = base["kernel"]


def _is_baseline(row: dict[str, Any]) -> bool:
    return row["kernel"].startswith("cuBLAS") or row["kernel"] == "torch._scaled_mm per-tensor"


def table(rows: list[dict[str, Any]]) -> str:
    cols = ("ms", "TFLOP/s", "% base", "max abs", "rel F")
    head = f"{'kernel':<40} {'size':>16} " + " ".join(f"{c:>9}" for c in cols)
    lines = [head, "-" * len(head)]
    for r in rows:
        ms = f"{r['ms']:.3f}" if "ms" in r else "-"
        tf = f"{r['tflops']:.0f}" if "tflops" in r else "-"
        pc = f"{r['percent_of_baseline']:.1f}" if "percent_of_baseline" in r else "-"
        ea = f"{r['max_abs_err']:.2e}" if "max_abs_err" in r else "-"
        ef = f"{r['rel_frobenius_err']:.2e}" if "rel_frobenius_err" in r else "-"
        flag = "" if r.get("correct", True) else "  WRONG"
        flag = f"  ERROR {r['error']}" if "error" in r else flag
        cells = " ".join(f"{c:>9}" for c in (ms, tf, pc, ea, ef))
        lines.append(f"{r['kernel']:<40} {r['size']:>16} {cells}{flag}")
    return "\n".join(lines)


# ------------------------------------------------------------------ main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", type=Path, help="write the rows and the setup here")
    p.add_argument("--bf16-sizes", default="4096,8192", type=_sizes,
                   help="cube edges of the bf16 GEMMs (default 4096,8192)")  # fmt: skip
    p.add_argument("--fp8-sizes", default="4096", type=_sizes,
                   help="cube edges of the FP8 GEMMs, multiples of 128 (default 4096)")  # fmt: skip
    p.add_argument("--rep-ms", type=int, default=200, help="do_bench's time per row (ms)")
    p.add_argument("--cpu-check", action="store_true",
                   help="no GPU: each launch once, small, in Triton's interpreter")  # fmt: skip
    args = p.parse_args(argv)
    if any(s % SCALE_BLOCK for s in args.fp8_sizes):
        p.error(f"--fp8-sizes: every size must be a multiple of {SCALE_BLOCK} (the scale block)")
    return args


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give sizes as integers, e.g. 4096,8192"
        ) from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give one or more positive sizes")
    return sizes


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cpu_check:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    import torch
    import triton

    runs = launches()
    rows: list[dict[str, Any]] = []
    if args.cpu_check:
        for m, n, k in CPU_BF16:
            rows += bf16_rows(m, n, k, runs, "cpu", None)
        for m, n, k in CPU_FP8:
            rows += fp8_rows(m, n, k, runs, "cpu", None)
    else:
        if not torch.cuda.is_available():
            raise SystemExit("no CUDA device: run on a GPU host, or pass --cpu-check")
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 references in fp32

        def timer(fn: Any) -> float:
            return float(triton.testing.do_bench(fn, rep=args.rep_ms, return_mode="median"))

        for s in args.bf16_sizes:
            rows += bf16_rows(s, s, s, runs, "cuda", timer)
        for s in args.fp8_sizes:
            rows += fp8_rows(s, s, s, runs, "cuda", timer)
        add_shares(rows)
    print(table(rows))
    if args.json:
        setup = {
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "device": torch.cuda.get_device_name() if not args.cpu_check else "cpu (interpreter)",
            "torch": torch.__version__,
            "triton": triton.__version__,
            "launches": {
                name: {"grid": r.grid, "constants": r.constants, **r.options}
                for name, r in runs.items()
            },  # fmt: skip
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"setup": setup, "rows": rows}, indent=2) + "\n")
    return 0 if all(r.get("correct", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
