"""What the sweeps of bench/tune_gpu.py share: the kernel files they rebuild, compiling a
variant with other macro values (NVRTC, the engine's options), timing it with the engine's
own timer, recording each variant's row, and the GEMM test products every GEMM section
checks its variants on."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# TF32 off before CuPy is imported (both are read at import/init time), so that the cuBLAS
# references and baselines are full fp32 products.
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
