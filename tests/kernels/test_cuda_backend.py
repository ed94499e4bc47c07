"""The CUDA C++ backend: nvcc's report (any machine with nvcc) and CuPy launches (GPU).

The compile tests hold whatever capability this machine has: compile-only here, NVRTC
plus the nvcc report on a GPU host. Each distinct source is compiled once per module.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from kplay.kernels.backends import toolkit_parse
from kplay.kernels.backends.base import Capability, CompiledKernel, KernelError, LaunchSpec
from kplay.kernels.backends.cuda import (
    CudaBackend,
    kernel_base_name,
    kernel_name_problem,
    kernel_parameters,
    normalise_arch,
)
from kplay.kernels.models import CompileStage

MAIN_SOURCE = r"""#include <cuda_fp16.h>
#include <mma.h>

extern "C" __global__ void vec_add(const float* a, const float* b, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

template <int TILE>
__global__ void shift_left(const float* in, float* out, int n)
{
    __shared__ float tile[TILE];
    int i = blockIdx.x * TILE + threadIdx.x;
    tile[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    if (i < n) out[i] = tile[(threadIdx.x + 1) % TILE];
}

// Indexed by a value known only at run time, the array cannot live in registers.
extern "C" __global__ void local_array(const int* idx, float* out)
{
    float scratch[256];
    for (int k = 0; k < 256; ++k) scratch[k] = k * 0.5f + out[k];
    out[threadIdx.x] = scratch[idx[threadIdx.x] & 255];
}

extern "C" __global__ void half_add(const __half* a, const __half* b, float* out)
{
    out[threadIdx.x] = __half2float(__hadd(a[threadIdx.x], b[threadIdx.x]));
}

extern "C" __global__ void wmma_tile(const __half* a, const __half* b, float* c)
{
    using namespace nvcuda;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}
"""

# Line 4 holds a syntax error; line 3 an unused variable (a warning).
SYNTAX_ERROR_SOURCE = """extern "C" __global__ void broken(float* out, int n)
{
    int unused;
    float y = ;
    out[0] = y;
}
"""


def _backend_or_skip(cache: Path) -> CudaBackend:
    backend = CudaBackend(cache_dir=cache)
    if backend.capability() is Capability.unavailable:
        pytest.skip("no nvcc (pip install nvidia-cuda-nvcc) and no GPU with CuPy")
    return backend


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> CudaBackend:
    return _backend_or_skip(tmp_path_factory.mktemp("cuda-cache"))


@pytest.fixture(scope="module")
def compiled(backend: CudaBackend, tmp_path_factory: pytest.TempPathFactory):
    """compiled(source, kernel) -> (stage, kernel), compiling each pair once."""
    done: dict[tuple[str, str], tuple[CompileStage, CompiledKernel | None]] = {}

    def get(source: str, kernel: str) -> tuple[CompileStage, CompiledKernel | None]:
        if (source, kernel) not in done:
            done[source, kernel] = backend.compile(source, kernel, tmp_path_factory.mktemp("w"))
        return done[source, kernel]

    return get


def _by_name(stage: CompileStage, fragment: str):
    found = [r for r in stage.resources if r.kernel and fragment in r.kernel]
    assert found, f"no resources for {fragment!r} in {[r.kernel for r in stage.resources]}"
    return found[0]


# ---------------------------------------------------------------- compiling


def test_correct_kernel_reports_registers_shared_ptx_and_sass(compiled) -> None:
    stage, _ = compiled(MAIN_SOURCE, "vec_add")
    assert stage.ok, stage.log
    assert not [d for d in stage.diagnostics if d.severity == "error"]
    first = stage.resources[0]
    assert first.kernel == "vec_add"
    assert first.registers and first.registers > 0
    assert first.shared_bytes == 0
    assert first.arch and first.arch.startswith("sm_")
    assert stage.ptx and ".entry vec_add" in stage.ptx
    assert stage.sass and "vec_add" in stage.sass and "EXIT" in stage.sass
    assert stage.compiler and "nvcc" in stage.compiler
    assert stage.duration_ms is not None


def test_template_kernel_compiles_through_a_name_expression(compiled) -> None:
    stage, _ = compiled(MAIN_SOURCE, "shift_left<128>")
    assert stage.ok, stage.log
    first = stage.resources[0]
    # c++filt writes shift_left<128>, cu++filt shift_left<(int)128>.
    assert first.kernel and re.search(r"shift_left<(\(int\))?128>", first.kernel), first
    assert first.shared_bytes == 128 * 4


def test_fp16_and_mma_headers_compile(compiled) -> None:
    stage, _ = compiled(MAIN_SOURCE, "vec_add")
    assert stage.ok, stage.log
    assert _by_name(stage, "half_add").registers
    assert _by_name(stage, "wmma_tile").registers
    assert stage.ptx and "wmma.mma" in stage.ptx


def test_local_array_indexed_at_run_time_uses_the_stack(compiled) -> None:
    stage, _ = compiled(MAIN_SOURCE, "vec_add")
    res = _by_name(stage, "local_array")
    spilled = (res.stack_frame_bytes or 0) + (res.spill_stores_bytes or 0)
    assert spilled > 0, res


def test_syntax_error_is_reported_on_its_line(compiled) -> None:
    stage, kernel = compiled(SYNTAX_ERROR_SOURCE, "broken")
    assert not stage.ok and kernel is None
    errors = [d for d in stage.diagnostics if d.severity == "error"]
    assert errors and errors[0].line == 4, stage.diagnostics
    assert "expected an expression" in errors[0].message
    warnings = [d for d in stage.diagnostics if d.severity == "warning"]
    assert [w.line for w in warnings] == [3], stage.diagnostics
    assert "kernel.cu(4)" in stage.log


def test_missing_kernel_names_the_kernel_expected(compiled) -> None:
    stage, kernel = compiled(MAIN_SOURCE, "vector_add")
    assert not stage.ok and kernel is None
    assert len(stage.diagnostics) == 1, stage.diagnostics
    message = stage.diagnostics[0].message
    assert "'vector_add' not found" in message


def test_repeated_compile_is_served_from_the_cache(
    backend: CudaBackend, compiled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _ = compiled(MAIN_SOURCE, "vec_add")

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("nvcc ran again for a source already compiled")

    monkeypatch.setattr("kplay.kernels.backends.cuda.start_nvcc", refuse)
    again, _ = backend.compile(MAIN_SOURCE, "vec_add", tmp_path)
    assert again.ok
    assert again.resources == first.resources
    assert again.sass == first.sass


def test_versions_name_the_compiler(backend: CudaBackend) -> None:
    versions = backend.versions()
    if backend.capability() is Capability.run:
        assert "cupy" in versions and "nvrtc" in versions
    else:
        assert "nvcc" in versions


# ---------------------------------------------------------------- parsing, no compiler


def test_parse_ptxas_reads_both_output_styles() -> None:
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z4tileILi8EEvPf' for 'sm_90'
ptxas info    : Function properties for _Z4tileILi8EEvPf
    64 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 64 bytes cumulative stack size, 2048 bytes smem
ptxas info    : Compiling entry function 'old_style' for 'sm_80'
ptxas info    : Function properties for old_style
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, 4096 bytes smem, 380 bytes cmem[0], 8 bytes cmem[2]
"""
    new, old = toolkit_parse.parse_ptxas(log)
    assert (new.kernel, new.registers, new.shared_bytes) == ("_Z4tileILi8EEvPf", 40, 2048)
    assert (new.stack_frame_bytes, new.spill_stores_bytes, new.spill_loads_bytes) == (64, 8, 12)
    assert (old.arch, old.registers, old.shared_bytes, old.constant_bytes) == (
        "sm_80",
        10,
        4096,
        388,
    )


def test_parse_diagnostics_finds_lines_columns_and_appended_code() -> None:
    source = "a\nb\n  float y = ;\n"
    log = """/tmp/x/abc.cu(3): error: expected an expression
    float y = ;
              ^

/tmp/x/abc.cu(9): error: identifier "k" is undefined
/tmp/x/abc.cu(9): warning #177-D: variable "kplay_kernel_reference_" was declared
__nv_name_map(2): error: Error in parsing name expression for lowered name lookup
/usr/include/cuda_fp16.h(12): warning #1-D: something
ptxas error   : Entry function 'k' uses too much shared data (0x13880 bytes, 0xc000 max)
"""
    diags, mains = toolkit_parse.parse_diagnostics(log, source, lambda msg: f"about k: {msg}")
    assert mains == {"/tmp/x/abc.cu"}
    assert (diags[0].line, diags[0].column, diags[0].severity) == (3, 13, "error")
    # Only the first error about the appended reference or the name map is kept.
    assert diags[1].line is None and diags[1].message == 'about k: identifier "k" is undefined'
    assert diags[2].severity == "warning" and diags[2].message.startswith("cuda_fp16.h(12)")
    assert diags[3].message.startswith("ptxas: Entry function")
    assert len(diags) == 4


def test_kernel_name_problems_are_worded_for_the_learner() -> None:
    describe = kernel_name_problem("vector_add")
    assert "'vector_add' not found" in describe('identifier "vector_add" is undefined')
    ambiguous = 'cannot determine which instance of overloaded function "k" is intended'
    assert describe(ambiguous) == f"kernel 'vector_add': {ambiguous}"


def test_kernel_parameters_from_the_source() -> None:
    source = """
// __global__ void vec_add(int decoy) in a comment is ignored
template <int N, typename T>
__global__ void __launch_bounds__(256, 2) tiled(const T* __restrict__ a,
                                                T* out, int n, float alpha = 1.0f)
{ }
extern "C" __global__ void vec_add(const float* a, const float* b, float* out, int n) { }
extern "C" __global__ void nothing(void) { }
"""
    assert kernel_parameters(source, "vec_add") == ["a", "b", "out", "n"]
    assert kernel_parameters(source, "tiled<64, float>") == ["a", "out", "n", "alpha"]
    assert kernel_parameters(source, "nothing") == []
    assert kernel_parameters(source, "absent") is None


def test_names_archs_and_truncation() -> None:
    assert kernel_base_name("ns::sgemm<64, 64, 8>") == "sgemm"
    assert [normalise_arch(a) for a in ("90", "9.0", "sm_90a", "compute_80")] == [
        "sm_90",
        "sm_90",
        "sm_90a",
        "sm_80",
    ]
    with pytest.raises(ValueError):
        normalise_arch("hopper")
    text = "".join(f"line {i}\n" for i in range(100_000))
    cut = toolkit_parse.truncate(text, 10_000, "SASS")
    assert len(cut) < 10_200 and "SASS truncated" in cut
    assert toolkit_parse.ptx_entry_params(
        ".visible .entry k(\n.param .u64 k_param_0,\n.param .u32 k_param_1\n)"
    ) == {"k": 2}


# ---------------------------------------------------------------- launching (GPU)


@pytest.fixture(scope="module")
def gpu_backend(backend: CudaBackend) -> CudaBackend:
    if backend.capability() is not Capability.run:
        pytest.skip("needs a CUDA GPU and CuPy")
    return backend


@pytest.mark.gpu
def test_vector_add_runs_on_the_gpu(gpu_backend: CudaBackend, compiled) -> None:
    import cupy

    stage, kernel = compiled(MAIN_SOURCE, "vec_add")
    assert stage.ok and kernel is not None, stage.log
    assert stage.compiler and stage.compiler.startswith("nvrtc")
    assert kernel.parameters() == ["a", "b", "out", "n"]
    n = 100_003
    rng = np.random.default_rng(7)
    a = cupy.asarray(rng.standard_normal(n, dtype=np.float32))
    b = cupy.asarray(rng.standard_normal(n, dtype=np.float32))
    out = cupy.full(n, cupy.nan, dtype=cupy.float32)
    spec = LaunchSpec(kernel="vec_add", grid=((n + 255) // 256,), block=(256,))
    kernel.launch([a, b, out, np.int32(n)], spec)
    cupy.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(cupy.asnumpy(out), cupy.asnumpy(a + b))


@pytest.mark.gpu
def test_template_kernel_runs_on_the_gpu(gpu_backend: CudaBackend, compiled) -> None:
    import cupy

    stage, kernel = compiled(MAIN_SOURCE, "shift_left<128>")
    assert stage.ok and kernel is not None, stage.log
    host = np.arange(256, dtype=np.float32)
    x, out = cupy.asarray(host), cupy.zeros(256, dtype=cupy.float32)
    kernel.launch([x, out, np.int32(256)], LaunchSpec(kernel="k", grid=(2,), block=(128,)))
    expected = np.concatenate([np.roll(host[:128], -1), np.roll(host[128:], -1)])
    np.testing.assert_array_equal(cupy.asnumpy(out), expected)


REVERSE_SOURCE = r"""
extern "C" __global__ void reverse(const float* in, float* out, int n)
{
    extern __shared__ float buf[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = in[i];
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buf[n - 1 - i];
}
"""


@pytest.mark.gpu
def test_more_than_48_kib_of_dynamic_shared_memory(gpu_backend: CudaBackend, compiled) -> None:
    import cupy

    stage, kernel = compiled(REVERSE_SOURCE, "reverse")
    assert stage.ok and kernel is not None, stage.log
    n = 25_600  # 100 KiB of floats, in one block
    x = cupy.arange(n, dtype=cupy.float32)
    out = cupy.full(n, cupy.nan, dtype=cupy.float32)
    spec = LaunchSpec(kernel="reverse", grid=(1,), block=(512,), shared_mem_bytes=n * 4)
    kernel.launch([x, out, np.int32(n)], spec)
    np.testing.assert_array_equal(cupy.asnumpy(out), np.arange(n, dtype=np.float32)[::-1])

    too_much = LaunchSpec(kernel="reverse", grid=(1,), block=(512,), shared_mem_bytes=1 << 20)
    with pytest.raises(KernelError, match="shared memory"):
        kernel.launch([x, out, np.int32(n)], too_much)


@pytest.mark.gpu
def test_bad_launches_raise_clear_errors(gpu_backend: CudaBackend, compiled) -> None:
    import cupy

    _, kernel = compiled(MAIN_SOURCE, "vec_add")
    assert kernel is not None
    a = cupy.zeros(4, dtype=cupy.float32)
    args = [a, a, a, np.int32(4)]
    with pytest.raises(KernelError, match="at most 1024"):
        kernel.launch(args, LaunchSpec(kernel="vec_add", grid=(1,), block=(64, 32)))
    with pytest.raises(KernelError, match="at least 1"):
        kernel.launch(args, LaunchSpec(kernel="vec_add", grid=(0,), block=(32,)))
    with pytest.raises(KernelError, match="grid y"):
        kernel.launch(args, LaunchSpec(kernel="vec_add", grid=(1, 1 << 20), block=(32,)))
