"""bench/triton_gemms.py: its arguments, the launches it reads from the solutions' kplay
lines, and every launch run once in Triton's interpreter (--cpu-check); on a GPU, a small
timed run end to end."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "triton_gemms.py"
WRONG_TILED = (
    ROOT / "kernels/problems/gemm_bf16/solutions/wrong/gemm_bf16_tiled_k_whole_slices.triton.py"
)


def _bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("triton_gemms_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(*args: str, patch: str = "") -> subprocess.CompletedProcess[str]:
    """The bench in a child process (it switches the interpreter on before importing
    triton); `patch` is Python run on the loaded module first."""
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('b', {str(BENCH)!r})\n"
        "b = importlib.util.module_from_spec(spec); spec.loader.exec_module(b)\n"
        f"{patch}\n"
        f"sys.exit(b.main({list(args)!r}))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT
    )


def test_arguments_have_the_issue_sizes_by_default() -> None:
    args = _bench().parse_args([])
    assert args.bf16_sizes == [4096, 8192] and args.fp8_sizes == [4096]
    assert args.json is None and not args.cpu_check
    args = _bench().parse_args(["--bf16-sizes", "1024", "--fp8-sizes", "256,512", "--json", "o"])
    assert args.bf16_sizes == [1024] and args.fp8_sizes == [256, 512]
    assert args.json == Path("o")


@pytest.mark.parametrize(
    "argv,words",
    [
        (["--fp8-sizes", "4000"], "multiple of 128"),
        (["--bf16-sizes", "4k"], "give sizes as integers"),
        (["--bf16-sizes", "0"], "positive sizes"),
    ],
)
def test_bad_arguments_are_refused_in_words(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        _bench().parse_args(argv)
    assert exc.value.code == 2
    assert words in capsys.readouterr().err


def test_launches_are_read_from_the_solutions_kplay_lines() -> None:
    bench = _bench()
    runs = bench.launches()
    assert set(runs) == {"triton tiled", "triton persistent", "triton blockscaled"}
    for run in runs.values():
        assert run.path.is_file() and run.options["num_warps"] == 8
    big = {"M": 4096, "N": 4096, "K": 4096}
    assert runs["triton tiled"].grid_for(big) == (32 * 16,)  # 128 x 256 tiles
    # One program per SM of an H100 SXM / H200, never more than there are tiles.
    assert runs["triton persistent"].grid_for(big) == (132,)
    assert runs["triton persistent"].grid_for({"M": 129, "N": 264, "K": 8}) == (4,)
    assert runs["triton blockscaled"].grid_for(big) == (32 * 32,)  # 128 x 128 tiles
    assert runs["triton blockscaled"].constants["BLOCK_K"] == bench.SCALE_BLOCK


def test_a_solution_without_a_launch_line_is_refused(tmp_path: Path) -> None:
    bare = tmp_path / "bare.triton.py"
    bare.write_text("import triton\n")
    with pytest.raises(SystemExit, match="no '# kplay:' line"):
        _bench().Launch("triton tiled", bare)


def test_every_launch_runs_and_is_checked_in_the_interpreter(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    done = _run("--cpu-check", "--json", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(out.read_text())
    rows = data["rows"]
    names = {(r["kernel"], r["size"]) for r in rows}
    assert ("triton persistent", "300x520x200") in names
    assert ("triton blockscaled", "129x256x384") in names
    assert len(rows) == 6 and all(r["correct"] for r in rows)
    bf16 = [r for r in rows if r["kind"] == "bf16"]
    fp8 = [r for r in rows if r["kind"] == "fp8"]
    assert max(r["rel_frobenius_err"] for r in bf16) < 1e-6  # exact products, fp32 sums
    assert all(1e-4 < r["rel_frobenius_err"] < 4e-3 for r in fp8)  # bf16 output rounding
    assert data["setup"]["launches"]["triton persistent"]["num_stages"] == 3
    assert "triton blockscaled" in done.stdout


def test_a_wrong_kernel_is_flagged_and_fails_the_run() -> None:
    patch = f"b.SOLUTIONS['triton tiled'] = b.Path({str(WRONG_TILED)!r})"
    done = _run("--cpu-check", patch=patch)
    assert done.returncode == 1
    wrong = [line for line in done.stdout.splitlines() if line.endswith("WRONG")]
    assert wrong and all(line.startswith("triton tiled") for line in wrong)


def test_without_a_gpu_the_timed_run_says_what_to_do() -> None:
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has a GPU")
    done = _run("--bf16-sizes", "256")
    assert done.returncode != 0 and "--cpu-check" in done.stderr


@pytest.mark.gpu
def test_a_small_timed_run_on_the_gpu(tmp_path: Path) -> None:
    out = tmp_path / "gpu.json"
    done = _run("--bf16-sizes", "1024", "--fp8-sizes", "1024", "--rep-ms", "20", "--json",
                str(out))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 6  # cuBLAS + 2 Triton (bf16), 2 _scaled_mm + 1 Triton (fp8)
    for row in rows:
        assert "error" not in row and row["ms"] > 0 and row["tflops"] > 0, row
    assert all(r["correct"] for r in rows if "correct" in r)
    assert all("percent_of_baseline" in r for r in rows)


# Builds each kernel the bench times as a GPU worker's box does (kernels.backends.
# triton_artifact, for sm_90: no GPU needed), at the first benchmark case's launch.
EXPORT = """
import importlib.util, json, sys
from kplay.kernels.artifact import ArgSpec, Variant
from kplay.kernels.backends.triton_artifact import TritonExporter
from kplay.kernels.catalog import get_problem
from kplay.kernels.launch import plan, resolve

slug, name = sys.argv[1:3]
problem = get_problem(slug)
path = problem.solution_path("correct", name)
source = path.read_text()
spec = importlib.util.spec_from_file_location("solution", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
default = problem.launch["triton"]
params = dict(problem.benchmarks[0].params)
launch = resolve(plan(default, source, None), params)
args = tuple(
    ArgSpec(kind="array", dtype=a.dtype, ndim=len(a.shape)) if a.is_array
    else ArgSpec(kind="scalar", dtype=a.dtype, value=int(params[a.name]))
    for a in problem.args
)
variant = Variant(args=args, constants=tuple(sorted(launch.constants.items())),
                  num_warps=launch.num_warps, num_stages=launch.num_stages)
kernel = getattr(module, default.kernel)
art = TritonExporter(kernel, path, default.kernel, source, (9, 0)).build(variant)
ptx = art.stage.ptx or ""
print(json.dumps({"arch": art.arch, "shared": art.abi["shared"], "warps": art.abi["num_warps"],
                  "scratch": art.abi["global_scratch"]["size"], "grid": list(launch.grid),
                  "wgmma": "wgmma.mma_async" in ptx, "tma": "cp.async.bulk.tensor" in ptx}))
"""
SMEM_OPTIN_SM90 = 227 * 1024  # what one block may opt in to on an H100 or H200


@pytest.mark.parametrize(
    "slug,name,grid,tma",
    [
        ("gemm_bf16", "gemm_bf16_tiled.triton.py", 512, False),
        ("gemm_bf16", "gemm_bf16_persistent.triton.py", 132, True),
        ("gemm_fp8", "gemm_fp8_blockscaled.triton.py", 1024, True),
    ],
)
def test_the_timed_kernels_build_for_hopper_as_a_worker_builds_them(
    slug: str, name: str, grid: int, tma: bool
) -> None:
    """wgmma on sm_90a, within Hopper's shared memory; the descriptor kernels use TMA and
    ask for global scratch (128 bytes a descriptor), which the image launcher allocates."""
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    done = subprocess.run([sys.executable, "-c", EXPORT, slug, name], capture_output=True,
                          text=True, timeout=600, cwd=ROOT, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    built = json.loads(done.stdout.strip().splitlines()[-1])
    assert built["arch"] == "sm_90a" and built["wgmma"] and built["warps"] == 8
    assert built["grid"] == [grid]
    assert built["shared"] <= SMEM_OPTIN_SM90
    assert built["tma"] == tma
    assert (built["scratch"] > 0) == tma
