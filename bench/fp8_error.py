"""How much an FP8 GEMM errs, on the CPU: the choice of scales and the length of the sums.

Two measurements, both in NumPy with float64 references (no GPU, no Triton):

- Scaling. A (M x K) and B (N x K) in float32 are quantised to e4m3 or e5m2 with one scale
  per tensor, per row, or per block (1 x 128 of A, 128 x 128 of B, the blocks of the
  gemm_fp8 problem), dequantised and multiplied exactly (float64). The error is against the
  float64 product of the float32 operands: what the quantisation alone costs. Two data sets:
  "gaussian" (every element N(0, 1)) and "outliers" (rows of A of log-normal size and a few
  columns of K a hundred times larger, rows of B of log-normal size).
- Accumulation. The same per-tensor e4m3 operands (gaussian), multiplied as a tensor core
  with short adders would: 32 exact products per k-step (one FP8 wgmma), the running sum
  truncated toward zero to 13 significant bits after each step, and the sum promoted (scaled
  and added to an fp32 accumulator) every 128, 512 or K elements. The error is against the
  float64 product of the dequantised operands: what the sums alone cost. The model is the one
  of tests/kernels/test_gemm_fp8.py, not a description of the hardware's adders.

    python bench/fp8_error.py --json bench/results/fp8_error.json
    python bench/fp8_error.py --sizes 256x256x1024 --seed 3
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import commit  # noqa: E402

BLOCK = 128  # the scales' block along K, and along N for B
STEP = 32  # K of one FP8 wgmma: products summed per step
BITS = 13  # significant bits kept in the short sums (the problem's tolerance comment)
FORMATS = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
DEFAULT_SIZES = "256x256x1024,256x256x4096,256x256x16384"
# (label, format, A's block, B's block): None is the whole extent of that axis.
SCHEMES = (
    ("e4m3 per tensor", "e4m3", (None, None), (None, None)),
    ("e4m3 per row", "e4m3", (1, None), (1, None)),
    ("e4m3 per block (1x128, 128x128)", "e4m3", (1, BLOCK), (BLOCK, BLOCK)),
    ("e5m2 per tensor", "e5m2", (None, None), (None, None)),
    ("e5m2 per block (1x128, 128x128)", "e5m2", (1, BLOCK), (BLOCK, BLOCK)),
)
PROMOTE = (BLOCK, 4 * BLOCK, None)  # every 128, every 512, never (once, at the end)


def formats() -> dict[str, dict[str, float]]:
    """Each format's largest value, smallest normal and subnormal, and its step at 1."""
    out = {}
    for name, dtype in FORMATS.items():
        info = ml_dtypes.finfo(dtype)
        out[name] = {
            "max": float(info.max),
            "smallest_normal": float(info.smallest_normal),
            "smallest_subnormal": float(info.smallest_subnormal),
            "ulp_at_1": float(info.eps),
            "mantissa_bits": int(info.nmant),
        }
    return out


# ------------------------------------------------------------------ data and scales


def operands(kind: str, m: int, n: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32)
    if kind == "outliers":
        a *= np.exp(rng.normal(0.0, 1.5, (m, 1))).astype(np.float32)
        channels = rng.choice(k, size=max(1, k // 512), replace=False)
        a[:, channels] *= np.float32(100.0)
        b *= np.exp(rng.normal(0.0, 0.5, (n, 1))).astype(np.float32)
    elif kind != "gaussian":
        raise ValueError(f"unknown data set {kind!r}: use 'gaussian' or 'outliers'")
    return a, b


def quantise(x: np.ndarray, block: tuple[int | None, int | None], fmt: str) -> dict[str, Any]:
    """x in `fmt`, one float32 scale per block (rows x cols; None: the whole axis), each
    block's largest magnitude mapped to the format's largest value. Returns the fp8 array,
    its dequantised float64 values and the fraction of non-zero inputs that became zero."""
    r, k = x.shape
    br, bc = block[0] or r, block[1] or k
    if r % br or k % bc:
        raise ValueError(f"a {r} x {k} operand does not split into {br} x {bc} blocks")
    top = float(ml_dtypes.finfo(FORMATS[fmt]).max)
    blocks = x.reshape(r // br, br, k // bc, bc)
    amax = np.abs(blocks).max(axis=(1, 3))
    scale = (np.maximum(amax, np.float32(1e-30)) / np.float32(top)).astype(np.float32)
    scaled = np.clip(blocks / scale[:, None, :, None], -top, top)
    q = scaled.reshape(r, k).astype(FORMATS[fmt])
    qb = q.astype(np.float64).reshape(r // br, br, k // bc, bc)
    deq = (qb * scale.astype(np.float64)[:, None, :, None]).reshape(r, k)
    lost = (q.astype(np.float32) == 0) & (x != 0)
    return {"q": q, "scale": scale, "deq": deq, "underflow": float(lost.sum() / (x != 0).sum())}


def errors(c: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    """Relative Frobenius error, the largest error in units of C's RMS, and the worst
    row's relative error (a row of C is one token's output: small rows count too)."""
    diff = c.astype(np.float64) - ref
    rms = float(np.sqrt(np.mean(ref * ref)))
    rows = np.linalg.norm(diff, axis=1) / np.linalg.norm(ref, axis=1)
    return {
        "rel_frobenius": float(np.linalg.norm(diff) / np.linalg.norm(ref)),
        "max_abs_over_rms": float(np.abs(diff).max() / rms),
        "worst_row": float(rows.max()),
    }


def scaling_rows(kind: str, m: int, n: int, k: int, seed: int) -> list[dict[str, Any]]:
    a, b = operands(kind, m, n, k, seed)
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    rows = []
    bf16 = a.astype(ml_dtypes.bfloat16).astype(np.float64)
    bf16_b = b.astype(ml_dtypes.bfloat16).astype(np.float64)
    rows.append({"scheme": "bf16, no scales", **errors(bf16 @ bf16_b.T, ref),
                 "underflow_a": 0.0})  # fmt: skip
    for label, fmt, block_a, block_b in SCHEMES:
        qa, qb = quantise(a, block_a, fmt), quantise(b, block_b, fmt)
        row = {"scheme": label, **errors(qa["deq"] @ qb["deq"].T, ref)}
        row["underflow_a"] = qa["underflow"]
        rows.append(row)
    return [{"data": kind, "size": f"{m}x{n}x{k}", **r} for r in rows]


# ------------------------------------------------------------------ short sums


def truncate(x: np.ndarray, bits: int) -> np.ndarray:
    """x with `bits` significant bits, the rest dropped (toward zero)."""
    mant, exp = np.frexp(x)
    return np.ldexp(np.trunc(mant * 2.0**bits) / 2.0**bits, exp)


def short_sum_product(qa: dict, qb: dict, bits: int | None, every: int | None) -> np.ndarray:
    """C in fp32 from per-tensor fp8 operands: each k-step's 32 products added to a running
    sum kept to `bits` bits (None: exact), the sum scaled and added to the fp32 accumulator
    every `every` elements of K (None: once, at the end)."""
    a, b = qa["q"].astype(np.float64), qb["q"].astype(np.float64)
    k = a.shape[1]
    every = every or k
    scale = np.float32(qa["scale"][0, 0]) * np.float32(qb["scale"][0, 0])
    acc = np.zeros((a.shape[0], b.shape[0]), dtype=np.float32)
    part = np.zeros(acc.shape, dtype=np.float64)
    for g in range(0, k, STEP):
        part = part + a[:, g : g + STEP] @ b[:, g : g + STEP].T  # exact: short products
        if bits is not None:
            part = truncate(part, bits)
        if (g + STEP) % every == 0 or g + STEP == k:
            acc += part.astype(np.float32) * scale
            part[:] = 0.0
    return acc


def accumulation_rows(m: int, n: int, k: int, seed: int) -> list[dict[str, Any]]:
    a, b = operands("gaussian", m, n, k, seed)
    qa, qb = quantise(a, (None, None), "e4m3"), quantise(b, (None, None), "e4m3")
    ref = qa["deq"] @ qb["deq"].T
    rows = [{"sums": "fp32, promoted every 128",
             **errors(short_sum_product(qa, qb, None, BLOCK), ref)}]  # fmt: skip
    for every in PROMOTE:
        when = f"promoted every {every}" if every else "never promoted"
        c = short_sum_product(qa, qb, BITS, every)
        rows.append({"sums": f"{BITS} bits, {when}", **errors(c, ref)})
    return [{"data": "gaussian", "size": f"{m}x{n}x{k}", **r} for r in rows]


# ------------------------------------------------------------------ main


def _sizes(text: str) -> list[tuple[int, int, int]]:
    out = []
    for item in text.split(","):
        parts = item.strip().lower().split("x")
        try:
            m, n, k = (int(p) for p in parts)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{item!r}: give each size as MxNxK, e.g. 256x256x1024"
            ) from None
        if min(m, n, k) < 1 or n % BLOCK or k % BLOCK:
            raise argparse.ArgumentTypeError(
                f"{item!r}: M must be positive, N and K positive multiples of {BLOCK}"
            )
        out.append((m, n, k))
    return out


def table(rows: list[dict[str, Any]], key: str) -> str:
    head = f"{'data':<9} {'size':>15} {key:<33} {'rel F':>9} {'max/rms':>9} {'worst row':>9}"
    lines = [head, "-" * len(head)]
    for r in rows:
        cells = " ".join(f"{r[c]:9.2e}" for c in ("rel_frobenius", "max_abs_over_rms", "worst_row"))
        extra = f"  zeros in A {100 * r['underflow_a']:.2f}%" if r.get("underflow_a") else ""
        lines.append(f"{r['data']:<9} {r['size']:>15} {r[key]:<33} {cells}{extra}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=_sizes, default=_sizes(DEFAULT_SIZES),
                   help=f"comma-separated MxNxK (default {DEFAULT_SIZES})")  # fmt: skip
    p.add_argument("--seed", type=int, default=1, help="seed of the operands (default 1)")
    p.add_argument("--json", type=Path, help="write the setup and the rows here")
    args = p.parse_args(argv)
    started = time.time()
    scaling = [r for m, n, k in args.sizes for kind in ("gaussian", "outliers")
               for r in scaling_rows(kind, m, n, k, args.seed)]  # fmt: skip
    accumulation = [r for m, n, k in args.sizes for r in accumulation_rows(m, n, k, args.seed)]
    print(table(scaling, "scheme"))
    print()
    print(table(accumulation, "sums"))
    if args.json:
        setup = {
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "commit": commit(),
            "machine": f"{platform.processor() or platform.machine()}, CPU only",
            "numpy": np.__version__,
            "ml_dtypes": ml_dtypes.__version__,
            "seed": args.seed,
            "step": STEP,
            "bits": BITS,
            "seconds": round(time.time() - started, 1),
        }
        out = {"setup": setup, "formats": formats(), "scaling": scaling,
               "accumulation": accumulation}  # fmt: skip
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
