"""The CUDA C++ row kernels of Part III (softmax, layernorm, bias_gelu), run on the host.

A machine without a GPU only compiles CUDA C++ (test_solutions.py). Here each kernel is
compiled as host C++ against a small emulation of the CUDA features these kernels use,
and run on the problem's own test cases (the ones small enough for a simulator), with the
problem's generate(), reference() and tolerance:

- a block runs as blockDim.x std::threads, one block after another;
- __syncthreads() is a barrier of the block's threads; __shared__ is a static (one block
  lives at a time); __shfl_xor_sync() exchanges through a slot per thread between two
  barriers of the warp's 32 threads;
- __expf, __ldcs, __ldg, __stcs and rsqrtf are the exact host functions and plain loads.

What it checks: indexing, bounds, the reductions and the online-softmax algebra, and
where barriers are needed for a program whose memory the host keeps consistent. What it
cannot: timing, the rounding of the fast intrinsics, and races that only the GPU's memory
model exposes (files marked `kplay-expect: wrong-on-gpu-only` are left out).
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from kplay.kernels.catalog import load_catalog
from kplay.kernels.draws import Draws

GPU_ONLY_MARK = "kplay-expect: wrong-on-gpu-only"

EMU_H = r"""
#pragma once
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstddef>
#include <memory>
#include <thread>
#include <vector>
#define CUDART_INF_F INFINITY
struct dim3 { unsigned x = 1, y = 1, z = 1; };
struct float4 { float x, y, z, w; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
using std::max;
using std::min;
thread_local dim3 threadIdx, blockIdx;
dim3 blockDim, gridDim;
std::unique_ptr<std::barrier<>> g_block;
std::vector<std::unique_ptr<std::barrier<>>> g_warps;
float g_slots[1024];
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
inline void __syncthreads() { g_block->arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float v, int lane_mask) {
    const unsigned t = threadIdx.x;
    std::barrier<>& warp = *g_warps[t >> 5];
    warp.arrive_and_wait();
    g_slots[t] = v;
    warp.arrive_and_wait();
    const float r = g_slots[t ^ lane_mask];
    warp.arrive_and_wait();
    return r;
}
inline float __expf(float x) { return std::exp(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
template <class F> void emu_launch(dim3 grid, dim3 block, F body) {
    gridDim = grid;
    blockDim = block;
    for (unsigned by = 0; by < grid.y; ++by)
        for (unsigned bx = 0; bx < grid.x; ++bx) {
            g_block = std::make_unique<std::barrier<>>(block.x);
            g_warps.clear();
            for (unsigned w = 0; w < (block.x + 31) / 32; ++w)
                g_warps.push_back(std::make_unique<std::barrier<>>(32));
            std::vector<std::thread> threads;
            for (unsigned t = 0; t < block.x; ++t)
                threads.emplace_back([=] {
                    threadIdx = {t, 0, 0};
                    blockIdx = {bx, by, 0};
                    body();
                });
            for (auto& th : threads) th.join();
        }
}
"""

# The launch of each problem, as problem.toml gives it (checked below), and the call.
DRIVER = r"""
#include KERNEL_FILE
extern "C" void run(int rows, int cols, const float* x, const float* a, const float* b,
                    float* out) {
#if defined(SOFTMAX)
    emu_launch({(unsigned)rows}, {256}, [&] { softmax(x, out, rows, cols); });
#elif defined(LAYERNORM)
    emu_launch({(unsigned)rows}, {256},
               [&] { layernorm(x, a, b, out, 1e-5f, rows, cols); });
#else
    emu_launch({(unsigned)((cols + 1023) / 1024), (unsigned)rows}, {256},
               [&] { bias_gelu(x, a, out, rows, cols); });
#endif
}
"""
LAUNCH = {
    "softmax": (["rows"], ["256"]),
    "layernorm": (["rows"], ["256"]),
    "bias_gelu": (["ceil_div(cols, 1024)", "rows"], ["256"]),
}
SLUGS = tuple(LAUNCH)


def _cuda_files() -> list[tuple[str, str, Path]]:
    out = []
    for slug in SLUGS:
        spec = load_catalog()[slug]
        for kind in ("correct", "wrong"):
            for backend, path in spec.solutions(kind):  # type: ignore[arg-type]
                if backend == "cuda" and GPU_ONLY_MARK not in path.read_text():
                    out.append((slug, kind, path))
    return out


FILES = _cuda_files()


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    root = tmp_path_factory.mktemp("emu")
    (root / "emu.h").write_text(EMU_H)
    (root / "math_constants.h").write_text("#pragma once\n")
    (root / "driver.cpp").write_text(DRIVER)

    def _build(slug: str, path: Path) -> ctypes.CDLL:
        lib = root / f"{slug}-{path.stem}.so"
        cmd = [
            cxx, "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-w",
            f"-I{root}", "-include", str(root / "emu.h"), f"-D{slug.upper()}",
            f'-DKERNEL_FILE="{path}"', str(root / "driver.cpp"), "-o", str(lib),
        ]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode and "barrier" in done.stderr and "No such file" in done.stderr:
            pytest.skip("the host compiler has no C++20 <barrier>")
        assert done.returncode == 0, done.stderr[-2000:]
        return ctypes.CDLL(str(lib))

    return _build


def _run_cases(slug: str, lib: ctypes.CDLL) -> dict[str, int]:
    """Each simulated test case's count of elements outside the tolerance."""
    spec = load_catalog()[slug]
    tol = spec.tolerance["float32"]
    ptr = ctypes.POINTER(ctypes.c_float)
    lib.run.argtypes = [ctypes.c_int, ctypes.c_int, ptr, ptr, ptr, ptr]
    bad: dict[str, int] = {}
    for case in spec.tests:
        if not case.simulate:
            continue
        rows, cols = int(case.params["rows"]), int(case.params["cols"])
        inputs = spec.reference.generate(case.params, Draws(case.seed))
        x = np.ascontiguousarray(inputs["x"], dtype=np.float32)
        a = np.ascontiguousarray(inputs.get("gamma", inputs.get("bias", np.zeros(cols))), "f4")
        b = np.ascontiguousarray(inputs.get("beta", np.zeros(cols)), dtype=np.float32)
        out = np.full((rows, cols), np.nan, dtype=np.float32)
        lib.run(rows, cols, *(arr.ctypes.data_as(ptr) for arr in (x, a, b, out)))
        want = np.asarray(spec.reference.reference(inputs, case.params)["out"], dtype=np.float64)
        ok = np.abs(out.astype(np.float64) - want) <= tol.atol + tol.rtol * np.abs(want)
        bad[case.name] = int((~ok).sum())
    return bad


def test_the_driver_launches_as_the_problems_do() -> None:
    for slug, (grid, block) in LAUNCH.items():
        launch = load_catalog()[slug].launch["cuda"]
        assert (launch.grid, launch.block) == (grid, block), slug
    assert {k for _s, k, _p in FILES} == {"correct", "wrong"}


@pytest.mark.parametrize("slug,kind,path", FILES, ids=[f"{s}-{p.name}" for s, _k, p in FILES])
def test_cuda_row_kernel_on_the_host(build, slug: str, kind: str, path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = _run_cases(slug, build(slug, path))
    assert bad, "no simulated case"
    if kind == "correct":
        assert not any(bad.values()), bad
    else:
        assert any(bad.values()), f"a wrong solution passed every case: {bad}"
