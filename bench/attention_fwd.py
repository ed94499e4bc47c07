"""Attention forward on the H200: the book's kernels against PyTorch's SDPA backends.

On the two benchmark cases of `attention_fwd` (bf16, batch 4, 16 heads, sequence 4096,
head dim 128, non-causal and causal), one call measures

- every correct Triton and CUDA C++ solution of the problem, through the engine
  (kernels.evaluate: checked on every test case, timed on the case, re-checked), the
  Triton one also under each extra launch of `--triton-configs`;
- torch.nn.functional.scaled_dot_product_attention restricted to each backend
  (FlashAttention, memory-efficient, cuDNN), timed by the engine's own timer
  (kernels.timing.time_gpu: L2 flushed before every rep), on inputs of the same shape;

and prints one Markdown table: median, TFLOP/s (the problem's own FLOP formula: half of
4*B*H*S*S*D when causal), percent of the FlashAttention backend and of the fastest row.

    python bench/attention_fwd.py
    python bench/attention_fwd.py --triton-configs 64:3:8,128:2:8,64:4:8 --json-out F
    python bench/attention_fwd.py --cases causal --skip-sdpa
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# The engine rows run on public seeds, so that the benchmark case's inputs and its float64
# reference (computed on the host: about 0.5 GB a case) are drawn once and reused by every
# row of the call, from the engine's memo, which must be large enough to keep them.
os.environ.setdefault("KPLAY_ENGINE_MEMO_MB", "4096")

FOLDER = ROOT / "kernels" / "problems" / "attention_fwd"
SLUG = "attention_fwd"
# torch.nn.attention.SDPBackend member names, and how the table calls them.
SDPA_BACKENDS = {
    "FLASH_ATTENTION": "SDPA FlashAttention",
    "EFFICIENT_ATTENTION": "SDPA memory-efficient",
    "CUDNN_ATTENTION": "SDPA cuDNN",
}
FLASH_LABEL = SDPA_BACKENDS["FLASH_ATTENTION"]


@dataclass(frozen=True)
class TritonConfig:
    """One launch of the Triton kernel: key tile, pipeline stages, warps."""

    block_n: int
    num_stages: int
    num_warps: int

    @property
    def label(self) -> str:
        return f"BLOCK_N={self.block_n} stages={self.num_stages} warps={self.num_warps}"


@dataclass
class Row:
    case: str  # the benchmark case's name
    kernel: str
    median_us: float | None
    flops: float
    note: str = ""

    @property
    def tflops(self) -> float | None:
        return tflops(self.flops, self.median_us)


def parse_configs(text: str) -> list[TritonConfig]:
    """'64:3:8,128:2:8' -> configs (BLOCK_N:num_stages:num_warps); '' -> none."""
    out = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        parts = item.split(":")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise ValueError(f"{item!r}: a Triton config is BLOCK_N:num_stages:num_warps")
        block_n, stages, warps = (int(p) for p in parts)
        if block_n & (block_n - 1) or 128 % block_n:
            raise ValueError(f"{item!r}: BLOCK_N must be a power of two dividing BLOCK_M = 128")
        out.append(TritonConfig(block_n, stages, warps))
    return out


def tflops(flops: float, median_us: float | None) -> float | None:
    if not median_us:
        return None
    return flops / (median_us * 1e-6) / 1e12


def _pct(value: float | None, ref: float | None) -> str:
    return f"{100.0 * value / ref:.1f}" if value and ref else "-"


def table(rows: list[Row]) -> str:
    """The Markdown table: each case's rows compared with that case's flash and best rows."""
    lines = [
        "| case | kernel | median (ms) | TFLOP/s | % of SDPA flash | % of fastest | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for case in dict.fromkeys(r.case for r in rows):
        mine = [r for r in rows if r.case == case]
        flash = next((r.tflops for r in mine if r.kernel == FLASH_LABEL), None)
        best = max((r.tflops for r in mine if r.tflops), default=None)
        for r in mine:
            ms = f"{r.median_us / 1000:.3f}" if r.median_us else "-"
            tf = f"{r.tflops:.0f}" if r.tflops else "-"
            lines.append(
                f"| {case} | {r.kernel} | {ms} | {tf} | {_pct(r.tflops, flash)} | "
                f"{_pct(r.tflops, best)} | {r.note} |"
            )
    return "\n".join(lines)


def _engine_row(case: Any, backend: str, path: Path, flops: float, config: TritonConfig | None):
    from kplay.kernels.evaluate import evaluate
    from kplay.kernels.models import LaunchOverride, RunJob

    launch = None
    if config is not None:
        launch = LaunchOverride(
            num_warps=config.num_warps,
            num_stages=config.num_stages,
            constants={"BLOCK_N": str(config.block_n)},
        )
    job = RunJob(
        problem=SLUG,
        backend=backend,
        source=path.read_text(),
        benchmark=case.name,
        launch=launch,
        public_seeds=True,
    )
    result = evaluate(job)
    label = f"{path.name} ({config.label})" if config else path.name
    median = result.timing.median_us if result.timing else None
    note = "" if result.state.value == "done" else f"{result.state.value}: {result.message}"
    res = result.compile.resources if result.compile else []
    if res and res[0].registers is not None:
        note = f"{res[0].registers} regs, {(res[0].shared_bytes or 0) // 1024} KiB smem. {note}"
    return Row(case.name, label, median, flops, note[:160]), json.loads(result.model_dump_json())


def _sdpa_rows(case: Any, flops: float, cap_s: float) -> list[Row]:
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from kplay.kernels import timing

    p = case.params
    shape = (p["batch"], p["heads"], p["seq"], p["dim"])
    gen = torch.Generator(device="cuda").manual_seed(case.seed)
    q, k, v = (
        torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(3)
    )
    causal, scale = bool(p["causal"]), p["dim"] ** -0.5
    rows = []
    for name, label in SDPA_BACKENDS.items():
        backend = getattr(SDPBackend, name)

        def run(backend: Any = backend) -> None:
            with sdpa_kernel([backend]):
                torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, is_causal=causal, scale=scale
                )

        try:
            stage = timing.time_gpu(run, cap_s=cap_s)
            rows.append(Row(case.name, label, stage.median_us, flops))
        except Exception as exc:  # noqa: BLE001 - a backend this build lacks is a row, not a stop
            rows.append(Row(case.name, label, None, flops, f"{type(exc).__name__}: {exc}"[:160]))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="full,causal", help="which of: full, causal")
    parser.add_argument("--triton-configs", default="", help="BLOCK_N:stages:warps,...")
    parser.add_argument("--skip-engine", action="store_true", help="SDPA rows only")
    parser.add_argument("--skip-sdpa", action="store_true", help="the book's kernels only")
    parser.add_argument("--cap-s", type=float, default=1.0, help="timing cap per SDPA row")
    parser.add_argument("--json-out", default="")
    args = parser.parse_args(argv)
    configs = parse_configs(args.triton_configs)
    wanted = set(filter(None, args.cases.split(",")))
    if not wanted <= {"full", "causal"}:
        parser.error(f"--cases: unknown {sorted(wanted - {'full', 'causal'})}")

    from kplay.kernels import formula
    from kplay.kernels.catalog import load_problem

    spec = load_problem(FOLDER)
    cases = [c for c in spec.benchmarks if ("causal" if c.params["causal"] else "full") in wanted]
    rows: list[Row] = []
    raw: list[dict] = []
    for case in cases:
        flops = float(formula.evaluate(spec.flops, case.params))
        if not args.skip_engine:
            for backend, path in spec.solutions("correct"):
                if backend not in ("triton", "cuda"):
                    continue
                for config in [None, *configs] if backend == "triton" else [None]:
                    row, result = _engine_row(case, backend, path, flops, config)
                    rows.append(row)
                    raw.append(result)
                    print(f"<!-- {row.case} {row.kernel}: {row.median_us} us -->", flush=True)
        if not args.skip_sdpa:
            rows.extend(_sdpa_rows(case, flops, args.cap_s))
    print(table(rows))
    if args.json_out:
        payload = {"rows": [asdict(r) | {"tflops": r.tflops} for r in rows], "engine": raw}
        Path(args.json_out).write_text(json.dumps(payload, indent=1))


if __name__ == "__main__":
    main()
