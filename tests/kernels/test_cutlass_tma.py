"""CUTLASS C++ cells with TMA descriptors: the launch line's tma. and cluster= reach them
as they reach CUDA C++, and the TMA GEMMs of gemm_bf16 ask for descriptors the driver
takes, into shared layouts that match where TMA puts each element.

The launches themselves are the solutions, which tests/kernels/test_solutions.py checks
on a GPU; here everything runs without one (the layout check compiles a host program
with nvcc against the CUTLASS headers, and skips where those are missing).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kplay.kernels import tma
from kplay.kernels.backends.cutlass import CutlassBackend
from kplay.kernels.catalog import PROBLEMS_DIR, load_problem
from kplay.kernels.evaluate import evaluate
from kplay.kernels.launch import plan, resolve
from kplay.kernels.models import RunJob, RunState

SOLUTIONS = Path(PROBLEMS_DIR) / "gemm_bf16" / "solutions" / "correct"
TMA_SOLUTIONS = ["gemm_bf16_tma_ws.cutlass.cu", "gemm_bf16_tma_simple.cutlass.cu"]
# The most dynamic shared memory one block of an H200 (compute capability 9.0) may opt in to.
SMEM_OPTIN_SM90 = 227 * 1024

# A kernel that takes both operands as descriptors and does nothing else: enough for
# the launch line to be accepted and nvcc to build it, in seconds.
TMA_CELL = """\
// kplay: grid=(1) block=128 cluster=(1) tma.A=(64,64) tma.A.swizzle=128B tma.B=(64,64)
#include <cuda.h>

extern "C" __global__ void gemm_bf16(const __grid_constant__ CUtensorMap A,
                                     const __grid_constant__ CUtensorMap B,
                                     float* C, int M, int N, int K) {
    if (threadIdx.x == 0 && M > 0 && N > 0) C[0] = float(K);
}
"""


def _problem():  # type: ignore[no-untyped-def]
    return load_problem(Path(PROBLEMS_DIR) / "gemm_bf16")


def _args() -> list[tuple[str, str]]:
    return [(a.name, a.dtype) for a in _problem().args]


def _cases() -> list[dict[str, int]]:
    problem = _problem()
    return [dict(c.params) for c in [*problem.tests, *problem.benchmarks]]


@pytest.mark.parametrize("name", TMA_SOLUTIONS)
def test_the_tma_gemms_ask_for_descriptors_the_driver_takes_on_every_case(name: str) -> None:
    source = (SOLUTIONS / name).read_text()
    launch = plan(_problem().launch["cutlass"], source, None)
    assert set(launch.tensor_maps) == {"A", "B"}
    for params in _cases():
        spec = resolve(launch, params, _args())
        shapes = {"A": (params["M"], params["K"]), "B": (params["K"], params["N"])}
        maps = {m.name: m for m in spec.tensor_maps}
        assert [maps["A"].index, maps["B"].index] == [0, 1]
        for array, shape in shapes.items():
            assert maps[array].dtype == "bfloat16" and maps[array].swizzle == "128B"
            tma.check_spec(maps[array], shape)  # raises where the driver would refuse
        assert spec.shared_mem_bytes <= SMEM_OPTIN_SM90, spec.shared_mem_bytes
        assert spec.shared_mem_bytes % 1024 == 0  # the ring plus one 1 KiB for alignment
        threads = spec.block[0]
        assert threads % 128 == 0 and threads >= 256  # a producer and consumer warpgroups


def test_a_bad_tensor_map_in_a_tma_gemm_would_be_refused_before_the_driver() -> None:
    source = (SOLUTIONS / TMA_SOLUTIONS[0]).read_text()
    wide = source.replace("tma.A=(128,64)", "tma.A=(128,128)", 1)
    launch = plan(_problem().launch["cutlass"], wide, None)
    spec = resolve(launch, {"M": 64, "N": 64, "K": 64}, _args())
    a_map = next(m for m in spec.tensor_maps if m.name == "A")
    with pytest.raises(tma.TmaError, match="may be at most 128 bytes; it is 256"):
        tma.check_spec(a_map, (64, 64))


def test_a_cutlass_cell_may_not_pick_its_own_target() -> None:
    source = "// kplay: arch=sm_90a\n" + TMA_CELL.split("\n", 1)[1]
    result = evaluate(RunJob(problem="gemm_bf16", backend="cutlass", source=source))
    assert result.state is RunState.compile_error
    assert result.message == (
        "arch= is for CUDA C++ cells; CUTLASS C++ (CuTe) is built for the device's target"
    )


def test_a_cutlass_cell_with_tensor_maps_and_a_cluster_compiles(tmp_path: Path) -> None:
    reason = CutlassBackend(arch="sm_90a", cache_dir=tmp_path / "cache").missing()
    if reason is not None:
        pytest.skip(reason)
    job = RunJob(problem="gemm_bf16", backend="cutlass", source=TMA_CELL, mode="compile")
    result = evaluate(job)
    assert result.state in (RunState.compiled, RunState.done), result.message
    assert result.compile is not None and result.compile.ok


LAYOUT_CHECK = r"""
#include KPLAY_SOLUTION
#include <cstdio>
// Where TMA's 128-byte swizzle puts byte `b` of a box whose rows are 128 bytes, written at
// a 1024-byte aligned address: the 16-byte chunk index XOR the row index (mod 8).
static int swizzled(int b) { return b ^ (((b >> 7) & 7) << 4); }

int main() {
    alignas(1024) static Element ring[kStages * (kStageA + kStageB)];
    Tensor sA = make_tensor(make_smem_ptr(ring), SmemLayoutA{});
    Tensor sB = make_tensor(make_smem_ptr(ring + kStages * kStageA), SmemLayoutB{});
    auto offset = [](auto p, const Element* from) {
        return int(reinterpret_cast<const char*>(raw_pointer_cast(p)) -
                   reinterpret_cast<const char*>(from));
    };
    int bad = 0;
    for (int s = 0; s < kStages; ++s)
        for (int k = 0; k < kBK; ++k) {
            for (int m = 0; m < kBM; ++m) {  // one box of A per stage: row m, column k
                int want = s * kStageA * 2 + swizzled(m * 128 + k * 2);
                bad += offset(&sA(m, k, s), ring) != want;
            }
            for (int n = 0; n < kBN; ++n) {  // kBN / kBoxN boxes of B: row k, column n
                int box = n / kBoxN, col = n % kBoxN;
                int want = s * kStageB * 2 + box * kBoxN * kBK * 2 + swizzled(k * 128 + col * 2);
                bad += offset(&sB(n, k, s), ring + kStages * kStageA) != want;
            }
        }
    printf("%d\n", bad);
    return bad != 0;
}
"""


def _layout_mismatches(solution: Path, tmp_path: Path) -> int:
    from kplay.kernels.backends.cutlass import _nvcc
    from kplay.kernels.backends.cutlass_build import find_headers

    headers, nvcc = find_headers(), _nvcc()
    if headers is None or nvcc is None:
        pytest.skip("needs nvcc and the CUTLASS headers")
    (tmp_path / "check.cu").write_text(LAYOUT_CHECK)
    cmd = [
        str(nvcc), "-arch=sm_90a", "-std=c++17", "--expt-relaxed-constexpr", *headers.flags(),
        f'-DKPLAY_SOLUTION="{solution}"', "-o", "check", "check.cu",
    ]  # fmt: skip
    built = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    ran = subprocess.run([str(tmp_path / "check")], capture_output=True, text=True, timeout=60)
    return int(ran.stdout.strip())


@pytest.mark.parametrize("name", TMA_SOLUTIONS)
def test_shared_layouts_put_every_element_where_tma_writes_it(name: str, tmp_path: Path) -> None:
    assert _layout_mismatches(SOLUTIONS / name, tmp_path) == 0


def test_the_layout_check_sees_b_stacked_along_n_first(tmp_path: Path) -> None:
    # B's atoms must go down K before across N (each TMA box is 64 k-rows of one column
    # block); the default order, N first, puts most of B elsewhere.
    source = (SOLUTIONS / TMA_SOLUTIONS[1]).read_text()
    assert source.count("Step<_2, _1, _3>{}") == 1
    wrong = tmp_path / "wrong.cutlass.cu"
    wrong.write_text(source.replace("Step<_2, _1, _3>{}", "Step<_1, _2, _3>{}"))
    assert _layout_mismatches(wrong, tmp_path) > 0
