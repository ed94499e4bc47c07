"""Launch the book's SGEMM and WMMA kernels (default sizes) once each on 4096^3, for a profiler.

    ncu --section WarpStateStats ... python bench/gemm_stalls.py

Nothing is timed here: the script exists so that Nsight Compute can report where the
warps of each kernel wait (bench/gpu_session.sh, step `stalls`). Each kernel is launched
twice, the first time as a warm-up, and checked against cuBLAS after the second launch.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["CUPY_TF32"] = "0"
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

from bench.tune_gpu import SGEMM, WMMA, build  # noqa: E402

N = 4096


def main() -> None:
    rng = np.random.default_rng(5)
    grid = ((N + 127) // 128, (N + 127) // 128)
    dims = (np.int32(N), np.int32(N), np.int32(N))
    for name, path, dtype, smem in (("sgemm", SGEMM, np.float32, 0),
                                    ("hgemm", WMMA, np.float16, 75776)):  # fmt: skip
        a = cp.asarray(rng.uniform(-1, 1, (N, N)).astype(dtype))
        b = cp.asarray(rng.uniform(-1, 1, (N, N)).astype(dtype))
        c = cp.empty((N, N), dtype=cp.float32)
        k = build(path, name, {})
        if smem:
            k.max_dynamic_shared_size_bytes = smem
        for _ in range(2):
            k(grid, (256,), (a, b, c, *dims), shared_mem=smem)
        ref = cp.matmul(a.astype(cp.float32), b.astype(cp.float32))
        err = float(cp.abs(c - ref).max())
        print(f"{name}: max |C - cuBLAS| = {err:.2e}", flush=True)


if __name__ == "__main__":
    main()
