"""The Hopper bf16 GEMM ladder (gemm_bf16_h1..h8 *.cu): hand-written TMA + wgmma kernels.

Without a GPU every rung and every wrong rung is compiled through the engine exactly as a
learner's cell is (arch=sm_90a from its launch line), and its SASS must hold what the rung
is about: HGMMA and UTMALDG everywhere, USETMAXREG once the warps specialise, a cluster
barrier, remote arrivals and multicast copies in the cluster rungs, and no spills. The
launch lines are resolved for every case of the problem and checked against the limits
the driver enforces, and each rung's wgmma descriptors are compared with the ones CuTe
makes for the same shared-memory tiles (built for the host against the CUTLASS headers).
On a GPU (`pytest -m gpu`) each correct rung must pass the check and
each wrong one must fail it.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from kplay.kernels import tma
from kplay.kernels.catalog import PROBLEMS_DIR, get_problem
from kplay.kernels.evaluate import evaluate
from kplay.kernels.launch import plan, resolve
from kplay.kernels.models import RunJob, RunResult, RunState
from kplay.kernels.sassfeatures import instructions, ptxas_advice, sass_features

FOLDER = Path(PROBLEMS_DIR) / "gemm_bf16" / "solutions"
RUNGS = sorted(p.name for p in (FOLDER / "correct").glob("gemm_bf16_h[0-9]*.cu"))
WRONG = sorted(p.name for p in (FOLDER / "wrong").glob("gemm_bf16_h[0-9]*.cu"))
# The most dynamic shared memory one block of compute capability 9.0 may opt in to.
SMEM_OPTIN_SM90 = 227 * 1024
# What each rung adds, as SASS badges (kernels/sassfeatures.py) beyond HGMMA and UTMALDG.
EXTRA = {
    "h1": set(),
    "h2": set(),
    "h3": {"setmaxnreg"},
    "h4": {"setmaxnreg"},
    "h5": {"setmaxnreg"},
    "h6": {"setmaxnreg", "cluster barrier", "DSMEM"},
    "h7": {"setmaxnreg", "cluster barrier", "DSMEM"},
    "h8": {"setmaxnreg", "cluster barrier", "DSMEM", "UTMASTG"},
}


def _rung(name: str) -> str:
    return name.removeprefix("gemm_bf16_").split("_", 1)[0]


def _job(source: str, mode: str = "compile") -> RunJob:
    return RunJob(problem="gemm_bf16", backend="cuda", source=source, mode=mode, seed=1234)


@cache
def _compiled(kind: str, name: str) -> RunResult:
    return evaluate(_job((FOLDER / kind / name).read_text()))


def test_the_ladder_is_all_there() -> None:
    assert [_rung(n) for n in RUNGS] == [f"h{i}" for i in range(1, 9)]
    assert len(WRONG) >= 3
    assert "cuda" in get_problem("gemm_bf16").backends


@pytest.mark.parametrize("name", RUNGS)
def test_each_rung_compiles_to_wgmma_fed_by_tma(name: str) -> None:
    result = _compiled("correct", name)
    assert result.state in (RunState.compiled, RunState.done), result.message
    comp = result.compile
    assert comp is not None and comp.ok and comp.sass
    badges = {u.feature.badge for u in sass_features(comp.sass)}
    assert {"HGMMA", "UTMALDG", "mbarrier"} <= badges, badges
    assert EXTRA[_rung(name)] <= badges, (EXTRA[_rung(name)], badges)
    assert "local memory" not in badges  # 128 accumulators stay in registers
    res = comp.resources[0]
    assert res.arch == "sm_90a" and res.spill_stores_bytes == 0
    opcodes = {i.opcode for i in instructions(comp.sass)}
    assert "HGMMA.64x256x16.F32.BF16" in opcodes, sorted(opcodes)
    if _rung(name) in ("h6", "h7", "h8"):
        assert "UTMALDG.2D.MULTICAST" in opcodes
    else:
        assert not any(op.endswith("MULTICAST") for op in opcodes)
    # ptxas had nothing to repair (a missing wgmma.fence) or to drop (a setmaxnreg).
    assert not ptxas_advice(comp.log), ptxas_advice(comp.log)


@pytest.mark.parametrize("name", WRONG)
def test_each_wrong_rung_compiles_too(name: str) -> None:
    result = _compiled("wrong", name)
    assert result.state in (RunState.compiled, RunState.done), result.message
    assert result.compile is not None and result.compile.ok
    badges = {u.feature.badge for u in sass_features(result.compile.sass or "")}
    assert {"HGMMA", "UTMALDG", "setmaxnreg"} <= badges
    assert "WRONG:" in (FOLDER / "wrong" / name).read_text()


def _cases() -> list[dict[str, int]]:
    problem = get_problem("gemm_bf16")
    return [dict(c.params) for c in [*problem.tests, *problem.benchmarks]]


@pytest.mark.parametrize("name", RUNGS)
def test_launch_lines_hold_on_every_case(name: str) -> None:
    source = (FOLDER / "correct" / name).read_text()
    problem = get_problem("gemm_bf16")
    launch = plan(problem.launch["cuda"], source, None)
    assert launch.arch == "sm_90a"
    args = [(a.name, a.dtype) for a in problem.args]
    threads = int(re.search(r"__launch_bounds__\((\d+), 1\)", source)[1])  # type: ignore[index]
    for params in _cases():
        spec = resolve(launch, params, args)
        assert spec.block[0] == threads
        assert spec.shared_mem_bytes <= SMEM_OPTIN_SM90 and spec.shared_mem_bytes % 1024 == 0
        maps = {m.name: m for m in spec.tensor_maps}
        # Rung 8 also writes C through a tensor map (its TMA-store epilogue).
        assert set(maps) == ({"A", "B", "C"} if _rung(name) == "h8" else {"A", "B"})
        shapes = {"A": (params["M"], params["K"]), "B": (params["K"], params["N"])}
        if "C" in maps:
            shapes["C"] = (params["M"], params["N"])
            assert maps["C"].box == (64, 32) and maps["C"].dtype == "float32"
        for array, shape in shapes.items():
            assert maps[array].swizzle == "128B"
            tma.check_spec(maps[array], shape)
        assert maps["A"].box[1] == 64 and maps["B"].box == (64, 64)
        # A's box is the rows one block multiplies: its full[s] byte count says so.
        rows = maps["A"].box[0]
        stage = rows * 64 * 2 + 64 * 256 * 2
        assert f"{rows} * 64 * 2" in source, (name, rows)
        assert spec.shared_mem_bytes >= stage + 1024
        if spec.cluster:
            tma.check_cluster(spec.cluster, spec.grid)
            assert spec.cluster[0] == 2


def test_a_missing_wgmma_fence_is_repaired_by_ptxas_and_said() -> None:
    """Why the ladder has no "missing wgmma.fence" wrong solution: ptxas sees registers
    written before a wgmma without a fence and injects one, with remark C7519."""
    source = (FOLDER / "correct" / "gemm_bf16_h3_warp_specialized.cu").read_text()
    call = "        wgmma_fence();\n"
    assert source.count(call) == 1
    result = evaluate(_job(source.replace(call, "")))
    assert result.compile is not None and result.compile.ok
    codes = [code for code, _text in ptxas_advice(result.compile.log)]
    assert "C7519" in codes, result.compile.log[-2000:]


def test_a_wrong_swizzle_is_only_in_the_launch_line() -> None:
    good = (FOLDER / "correct" / "gemm_bf16_h3_warp_specialized.cu").read_text()
    bad = (FOLDER / "wrong" / "gemm_bf16_h3_tma_unswizzled.cu").read_text()
    line = good.split("\n", 1)[0].replace("tma.A.swizzle=128B", "tma.A.swizzle=none")
    assert line == bad.split("\n", 1)[0]
    code = "#include <cuda/std/cstdint>"
    assert good[good.index(code) :] == bad[bad.index(code) :]


def test_compile_only_bench_covers_every_rung() -> None:
    from bench.hopper_ladder import failures, rung_files, table

    assert [n for n, _ in rung_files()] == [_rung(n) for n in RUNGS]
    rows = {"h1": {"state": "compiled", "badges": ["HGMMA", "UTMALDG"], "registers": 154},
            "h2": {"state": "compile_error", "message": "kernel.cu(3): error"}}  # fmt: skip
    assert failures(rows, compile_only=True) == ["h2"]
    text = table(rows, compile_only=True)
    assert "| h1 | compiled | 154 | yes | yes | - |" in text and "kernel.cu(3)" in text


@pytest.mark.gpu
@pytest.mark.parametrize("name", RUNGS)
def test_each_rung_is_right_on_a_gpu(name: str) -> None:
    result = evaluate(_job((FOLDER / "correct" / name).read_text(), mode="check"))
    assert result.state is RunState.done, f"{result.state}: {result.message}"
    assert result.check is not None and result.check.ok and result.check.cases


@pytest.mark.gpu
@pytest.mark.parametrize("name", WRONG)
def test_each_wrong_rung_fails_on_a_gpu(name: str) -> None:
    result = evaluate(_job((FOLDER / "wrong" / name).read_text(), mode="check"))
    assert result.state in (RunState.wrong, RunState.runtime_error), result.message


DESCRIPTOR_CHECK = r"""
#include <cute/tensor.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/bfloat16.h>
#include <cstdio>
#include <cstdint>
using namespace cute;
using Elt = cutlass::bfloat16_t;
KPLAY_HELPERS
// CuTe's GMMA layouts for the tiles TMA writes (test_cutlass_tma.py checks that these put
// every element where the 128-byte swizzle of a box does), and CuTe's descriptors of them.
int main() {
    alignas(1024) static Elt ring[128 * 64 + 256 * 64];
    using LA = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Elt>{}, Shape<_128, _64>{}));
    using LB = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Elt>{}, Shape<_256, _64>{},
                                      Step<_2, _1>{}));
    Tensor sA = make_tensor(make_smem_ptr(ring), LA{});
    Tensor sB = make_tensor(make_smem_ptr(ring + 128 * 64), LB{});
    auto fields = [](uint64_t d) { return d >> 16; };  // all but the start address
    auto start = [](uint64_t d) { return long((d & 0x3FFF) << 4); };
    int bad = 0;
    for (int kk = 0; kk < 4; ++kk) {
        for (int c = 0; c < 2; ++c) {  // consumer c's 64 rows of a 128-row A tile
            auto a = local_tile(sA, Shape<_64, _16>{}, make_coord(c, kk));
            uint64_t want = GMMA::make_gmma_desc<GMMA::Major::K>(a).desc_;
            uint64_t got = desc_a(c * 8192, kk);
            long at = (char*)raw_pointer_cast(&a(0, 0)) - (char*)ring;
            bad += fields(got) != fields(want) || start(got) != at;
        }
        auto b = local_tile(sB, Shape<_256, _16>{}, make_coord(0, kk));
        uint64_t want = GMMA::make_gmma_desc<GMMA::Major::MN>(b).desc_;
        uint64_t got = desc_b(0, kk);
        long at = (char*)raw_pointer_cast(&b(0, 0)) - (char*)(ring + 128 * 64);
        bad += fields(got) != fields(want) || start(got) != at;
    }
    printf("%d\n", bad);
    return 0;
}
"""


def _descriptor_mismatches(source: str, tmp_path: Path) -> int:
    """Build the rung's own desc_a / desc_b for the host and compare them with CuTe's."""
    import subprocess

    from kplay.kernels.backends.cutlass import _nvcc
    from kplay.kernels.backends.cutlass_build import find_headers

    headers, nvcc = find_headers(), _nvcc()
    if headers is None or nvcc is None:
        pytest.skip("needs nvcc and the CUTLASS headers")
    wanted = ("smem_desc", "desc_a", "desc_b")
    pieces = []
    for name in wanted:
        m = re.search(rf"__device__ __forceinline__ uint64_t {name}\(.*?\n}}\n", source, re.S)
        assert m, name
        pieces.append(m[0].replace("__device__ __forceinline__", "inline"))
    (tmp_path / "check.cu").write_text(DESCRIPTOR_CHECK.replace("KPLAY_HELPERS", "".join(pieces)))
    cmd = [str(nvcc), "-arch=sm_90a", "-std=c++17", "--expt-relaxed-constexpr",
           *headers.flags(), "-o", "check", "check.cu"]  # fmt: skip
    built = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    ran = subprocess.run([str(tmp_path / "check")], capture_output=True, text=True, timeout=60)
    return int(ran.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_the_wgmma_descriptors_are_cutes_for_the_same_tiles(tmp_path: Path) -> None:
    sources = {(FOLDER / "correct" / n).read_text() for n in RUNGS}
    helpers = {
        s[s.index("__device__ __forceinline__ uint64_t smem_desc") :][:1500] for s in sources
    }
    assert len(helpers) == 1  # every rung carries the same descriptor code
    assert _descriptor_mismatches(next(iter(sources)), tmp_path) == 0


@pytest.mark.slow
def test_the_descriptor_check_sees_swapped_offsets(tmp_path: Path) -> None:
    source = (FOLDER / "wrong" / "gemm_bf16_h3_b_offsets_swapped.cu").read_text()
    assert _descriptor_mismatches(source, tmp_path) == 4


@pytest.mark.slow
def test_the_bench_compile_only_run_passes_for_every_rung(tmp_path: Path) -> None:
    """The invocation a GPU host starts with: every rung through the engine, one child
    process each, badges in the table and the JSON, exit status 0."""
    import json
    import subprocess
    import sys

    out = tmp_path / "ladder.json"
    script = Path(__file__).resolve().parents[2] / "bench" / "hopper_ladder.py"
    ran = subprocess.run([sys.executable, str(script), "--compile-only", "--json", str(out)],
                         capture_output=True, text=True, timeout=900)  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert sorted(rows) == [_rung(n) for n in RUNGS]
    for name, row in rows.items():
        assert row["state"] in ("compiled", "done") and row["spill_bytes"] == 0, row
        assert {"HGMMA", "UTMALDG"} | EXTRA[name] <= set(row["badges"]), row
        assert f"| {name} | {row['state']} | {row['registers']} | yes | yes |" in ran.stdout
