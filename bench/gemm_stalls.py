"""Launch the book's SGEMM and WMMA kernels on 4096^3 for a profiler, nothing timed.

    ncu --section WarpStateStats ... python bench/gemm_stalls.py [--from-tune tune.json]

The script exists so that Nsight Compute can report where the warps of each kernel wait
(bench/gpu_session.sh, step `stalls`). It launches each kernel at its default sizes and,
with --from-tune, also the fastest correct variant of each section of a tune_gpu.py
result file. Every kernel runs twice (the first is a warm-up) and is checked against a
float32 cuBLAS product after the second launch.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

os.environ["CUPY_TF32"] = "0"
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

from bench.tune_gpu import SGEMM, WMMA, WMMA_CLUSTER, build, gemm_grid, wmma_smem_bytes  # noqa: E402

N = 4096
KERNELS = {
    "sgemm": ("sgemm", SGEMM, np.float32),
    "wmma": ("hgemm", WMMA, np.float16),
    "wmmac": ("hgemm", WMMA_CLUSTER, np.float16),
}


def source_defaults(path: Path) -> dict[str, int]:
    """The kernel file's own defaults: every `#ifndef X` / `#define X <int>` pair."""
    found = re.findall(r"#ifndef (\w+)\s*\n#define \1 (\d+)", path.read_text())
    return {name: int(value) for name, value in found}


def best_variants(tune_json: Path) -> dict[str, dict[str, int]]:
    """The fastest correct variant of each kernel file, as its macro dict."""
    best: dict[str, tuple[float, dict[str, int]]] = {}
    for row in json.loads(tune_json.read_text()):
        section, us = row["section"], row.get("us")
        kernel = row.get("kernel", section)  # a section may time more than one kernel file
        if kernel not in KERNELS or not row.get("ok") or us is None:
            continue
        if kernel not in best or us < best[kernel][0]:
            macros = {k: int(v) for k, v in (kv.split("=") for kv in row["variant"].split(","))}
            best[kernel] = (us, macros)
    return {s: m for s, (_, m) in best.items()}


def launch(section: str, macros: dict[str, int], rng: Any) -> None:
    name, path, dtype = KERNELS[section]
    d = {**source_defaults(path), **macros}
    smem = wmma_smem_bytes(d) if section != "sgemm" else 0
    a = cp.asarray(rng.uniform(-1, 1, (N, N)).astype(dtype))
    b = cp.asarray(rng.uniform(-1, 1, (N, N)).astype(dtype))
    c = cp.empty((N, N), dtype=cp.float32)
    k = build(path, name, macros)
    if smem:
        k.max_dynamic_shared_size_bytes = smem
    grid = gemm_grid(d, N, N)
    for _ in range(2):
        k(grid, (d["NTHREADS"],), (a, b, c, np.int32(N), np.int32(N), np.int32(N)),
          shared_mem=smem)  # fmt: skip
    ref = cp.matmul(a.astype(cp.float32), b.astype(cp.float32))
    err = float(cp.abs(c - ref).max())
    print(f"{section} {macros or 'defaults'}: max |C - cuBLAS| = {err:.2e}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from-tune", type=Path)
    args = parser.parse_args()
    rng = np.random.default_rng(5)
    runs: list[tuple[str, dict[str, int]]] = [("sgemm", {}), ("wmma", {}), ("wmmac", {})]
    if args.from_tune and args.from_tune.exists():
        runs += list(best_variants(args.from_tune).items())
    for section, macros in runs:
        launch(section, macros, rng)


if __name__ == "__main__":
    main()
