"""CUTLASS's collective-builder Hopper GEMMs against cuBLAS, in one standalone program.

The playground's cells cannot run `GemmUniversalAdapter` host code (book/p4/04-cutlass-cute.md,
"The collective builder, and why the cells do without it"), so this benchmark is a host
program of its own, bench/cutlass_builder/builder_gemm.cu: bf16 A (M x K) and B (K x N),
both row-major as in gemm_bf16, fp32 accumulation, D in fp32 (the problem's contract) and in
bf16 (what torch.matmul gives); cooperative 128x256x64 and ping-pong 128x128x64 schedules,
clusters 1x1 and 2x1, automatic stage counts, the persistent tile scheduler. cublasGemmEx with
the same two contracts is timed in the same process by the same method (L2 swept before every
rep, CUDA events, median). Each cfg_*.cu is one configuration and one translation unit, built
in parallel.

    python bench/cutlass_builder.py --compile-only   # nvcc, CUTLASS and cuBLAS; no GPU
    python bench/cutlass_builder.py                  # also runs 4096^3 and 8192^3 on GPU 0

Writes bench/results/cutlass_builder_<gpu>.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "bench" / "cutlass_builder"
RESULTS = ROOT / "bench" / "results"
FLAGS = ["-arch=sm_90a", "-std=c++17", "-O3", "--expt-relaxed-constexpr", "-DNDEBUG"]


class SetupError(RuntimeError):
    """A tool or a library the build needs is missing."""


def find_nvcc() -> Path:
    found = shutil.which("nvcc")
    for candidate in (found, "/usr/local/cuda/bin/nvcc"):
        if candidate and Path(candidate).is_file():
            return Path(candidate).resolve()
    raise SetupError("nvcc not found on PATH nor at /usr/local/cuda/bin/nvcc")


def find_cutlass(given: str | None) -> list[Path]:
    """-I folders for cute/, cutlass/ and cutlass/util/: --cutlass-include, else what the
    engine uses (kernels.backends.cutlass_build: the nvidia-cutlass wheel's headers)."""
    if given:
        include = Path(given).resolve()
        util = include.parent / "tools" / "util" / "include"
    else:
        sys.path.insert(0, str(ROOT))
        try:
            from kplay.kernels.backends.cutlass_build import find_headers
        except ImportError as exc:
            raise SetupError(
                f"cannot import kplay ({exc}): activate the project's venv, or pass "
                "--cutlass-include DIR (the folder that holds cute/ and cutlass/)"
            ) from exc
        headers = find_headers()
        if headers is None:
            raise SetupError(
                "CUTLASS headers not found: pip install nvidia-cutlass==4.2.0.0, or pass "
                "--cutlass-include DIR"
            )
        include, util = headers.include, headers.util
    if not (include / "cute" / "tensor.hpp").is_file():
        raise SetupError(f"no CUTLASS headers (cute/tensor.hpp) under {include}")
    if util is None or not (util / "cutlass" / "util" / "packed_stride.hpp").is_file():
        raise SetupError(f"CUTLASS's tools/util/include (packed_stride.hpp) not beside {include}")
    return [include, util]


def _cublas_in(include: Path, libdirs: list[Path]) -> tuple[Path, Path, str] | None:
    if not (include / "cublas_v2.h").is_file():
        return None
    for lib in libdirs:
        names = sorted(p.name for p in lib.glob("libcublas.so*")) if lib.is_dir() else []
        if names:
            return include, lib, names[0]  # libcublas.so sorts before libcublas.so.13
    return None


def find_cublas(nvcc: Path, given: str | None) -> tuple[Path, Path, str]:
    """(include dir, lib dir, library file name): --cublas-root, the CUDA toolkit (nvcc's,
    $CUDA_HOME, $CUDA_PATH, /usr/local/cuda), or the nvidia-cublas wheel of this interpreter
    (nvidia/cu13, or nvidia/cublas for CUDA 12)."""
    roots: list[Path] = []
    if given:
        roots.append(Path(given).resolve())
    cudas = [nvcc.parent.parent, os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    for cuda in dict.fromkeys(Path(c) for c in [*cudas, "/usr/local/cuda"] if c):
        roots += [cuda, cuda / "targets" / "x86_64-linux"]
    spec = importlib.util.find_spec("nvidia")
    if spec is not None and spec.submodule_search_locations:
        for base in spec.submodule_search_locations:
            roots += sorted(Path(base).glob("cu1*")) + [Path(base) / "cublas"]
    for root in roots:
        found = _cublas_in(root / "include", [root / "lib64", root / "lib"])
        if found:
            return found
    raise SetupError(
        "cuBLAS not found (cublas_v2.h and libcublas.so*) in "
        + ", ".join(str(r) for r in roots)
        + ": install the CUDA toolkit's cuBLAS, or `pip install nvidia-cublas` (CUDA 13), "
        "or pass --cublas-root DIR"
    )


def _local_deps(src: Path, seen: set[Path] | None = None) -> set[Path]:
    """src and the files of this folder it includes with #include "...", transitively."""
    seen = set() if seen is None else seen
    seen.add(src)
    for name in re.findall(r'^#include "([^"]+)"', src.read_text(), re.M):
        dep = SRC / name
        if dep.is_file() and dep not in seen:
            _local_deps(dep, seen)
    return seen


def _stale(obj: Path, src: Path) -> bool:
    if not obj.is_file():
        return True
    return obj.stat().st_mtime < max(p.stat().st_mtime for p in _local_deps(src))


def build(args: argparse.Namespace) -> tuple[Path, dict[str, Any]]:
    nvcc = find_nvcc()
    includes = find_cutlass(args.cutlass_include)
    cublas_inc, cublas_lib, cublas_name = find_cublas(nvcc, args.cublas_root)
    out_dir = Path(args.build_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    inc_flags = [f"-I{p}" for p in [*includes, cublas_inc, SRC]]
    sources = sorted(SRC.glob("*.cu"))
    jobs = args.jobs or os.cpu_count() or 1
    print(
        f"nvcc {nvcc} ({_nvcc_version(nvcc)}), CUTLASS {includes[0]}, cuBLAS {cublas_lib}/"
        f"{cublas_name}; {len(sources)} translation units on {jobs} jobs",
        file=sys.stderr,
    )

    def compile_one(src: Path) -> tuple[str, float | None]:
        obj = out_dir / (src.stem + ".o")
        if not args.rebuild and not _stale(obj, src):
            return src.name, None
        t0 = time.perf_counter()
        cmd = [str(nvcc), *FLAGS, *inc_flags, "-c", str(src), "-o", str(obj)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SetupError(f"nvcc failed on {src.name}:\n{proc.stderr[-4000:]}")
        seconds = time.perf_counter() - t0
        print(f"  {src.name}: {seconds:.1f} s", file=sys.stderr)
        return src.name, seconds

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        units = dict(pool.map(compile_one, sources))
    binary = out_dir / "builder_gemm"
    link = [str(nvcc), "-arch=sm_90a", *[str(out_dir / (s.stem + ".o")) for s in sources],
            f"-L{cublas_lib}", f"-l:{cublas_name}", f"-Xlinker=-rpath={cublas_lib}",
            "-o", str(binary)]  # fmt: skip
    proc = subprocess.run(link, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SetupError(f"link failed:\n{proc.stderr[-4000:]}")
    wall = time.perf_counter() - t0
    info = {
        "nvcc": _nvcc_version(nvcc),
        "flags": FLAGS,
        "jobs": jobs,
        "wall_s": round(wall, 1),
        "units_s": {k: (round(v, 1) if v is not None else "up to date") for k, v in units.items()},
        "cublas": f"{cublas_lib}/{cublas_name}",
        "cutlass_include": str(includes[0]),
    }
    print(f"built {binary} in {wall:.1f} s", file=sys.stderr)
    return binary, info


def _nvcc_version(nvcc: Path) -> str:
    out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True).stdout
    match = re.search(r"release ([\d.]+)", out)
    return match.group(1) if match else "?"


def _lines(binary: Path, extra: list[str]) -> tuple[int, list[dict[str, Any]]]:
    proc = subprocess.run([str(binary), *extra], stdout=subprocess.PIPE, text=True)
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc.returncode, rows


def _gpu_tag(name: str) -> str:
    for tag in ("h200", "h100", "h800", "h20", "gh200"):
        if tag in name.lower():
            return tag
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "gpu"


def _commit() -> str:
    proc = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)  # fmt: skip
    return proc.stdout.strip() or "?"


def table(runs: list[dict[str, Any]]) -> str:
    head = [
        "| size | config | out | stages | median µs | TFLOP/s | % of cuBLAS | max rel. err |",
        "|---|---|---|---|---|---|---|---|",
    ]
    body = []
    for run in runs:
        for r in run["rows"]:
            err = "-" if r.get("max_err") is None else f"{r['max_err']:.1e}"
            if r.get("error"):
                err = f"{err} ({r['error']})"
            size = f"{r['M']}x{r['N']}x{r['K']}"
            body.append(
                f"| {size} | {r['config']} | {r['out']} | {r.get('stages', '-')} | "
                f"{r['median_us']:.1f} | {r['tflops']:.1f} | {r['pct_of_cublas']:.1f} | {err} |"
            )
    return "\n".join(head + body)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--compile-only", action="store_true", help="build; run nothing on a GPU")
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--reps", type=int, default=100, help="timed reps per GEMM (median)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--swizzle", type=int, default=1, help="tile scheduler max_swizzle_size")
    parser.add_argument("--only", default="", help="configs whose name contains this")
    parser.add_argument("--jobs", type=int, default=0, help="parallel nvcc (default: all cores)")
    parser.add_argument("--rebuild", action="store_true", help="recompile every unit")
    parser.add_argument("--build-dir", default=str(SRC / "build"))
    parser.add_argument("--cutlass-include", help="folder holding cute/ and cutlass/")
    parser.add_argument("--cublas-root", help="folder with include/cublas_v2.h and lib*/")
    parser.add_argument("--out", help="results file (default bench/results/cutlass_builder_<gpu>)")
    args = parser.parse_args()

    try:
        binary, compile_info = build(args)
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rc, configs = _lines(binary, ["--list"])  # compile-time facts; touches no GPU
    for c in configs:
        print(
            f"  {c['config']}: {c['stages']} stages, {c['smem_bytes']} B shared "
            f"({c['epilogue_smem_bytes']} B epilogue), {c['threads']} threads",
            file=sys.stderr,
        )
    if args.compile_only:
        print(json.dumps({"compile": compile_info, "configs": configs}, indent=2))
        return rc

    runs = []
    worst = 0
    for size in args.sizes:
        extra = ["--size", str(size), "--reps", str(args.reps), "--warmup", str(args.warmup),
                 "--swizzle", str(args.swizzle)]  # fmt: skip
        if args.only:
            extra += ["--only", args.only]
        rc, lines = _lines(binary, extra)
        worst = max(worst, rc)
        device = next((x for x in lines if x.get("kind") == "device"), {})
        errors = [x for x in lines if x.get("kind") == "error"]
        runs.append({"size": size, "exit": rc, "device": device, "errors": errors,
                     "rows": [x for x in lines if x.get("kind") == "row"]})  # fmt: skip
        if errors or not device:
            print(f"error at {size}: exit {rc}, {errors or 'no device line'}", file=sys.stderr)
            break
    name = next((r["device"]["name"] for r in runs if r["device"]), None)
    if name is None:
        print("error: no run reached a GPU; nothing written", file=sys.stderr)
        return worst or 3
    out = Path(args.out) if args.out else RESULTS / f"cutlass_builder_{_gpu_tag(name)}.json"
    result = {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "commit": _commit(),
        "command": "python bench/cutlass_builder.py " + " ".join(sys.argv[1:]),
        "device": name,
        "compile": compile_info,
        "runs": runs,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(runs))
    print(f"\nwrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return worst


if __name__ == "__main__":
    sys.exit(main())
