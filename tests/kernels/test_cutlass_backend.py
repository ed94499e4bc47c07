"""The CUTLASS C++ backend: nvcc against the CUTLASS headers (any machine with nvcc and the
nvidia-cutlass wheel), and the GEMM through the box and the checker (GPU).

Without nvcc or the headers the compile tests skip; the backend's own verdict on such a
machine (unavailable, with the reason) is tested everywhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kplay.kernels.backends.base import Capability, get_backend
from kplay.kernels.backends.cutlass import CutlassBackend, cutlass_arch
from kplay.kernels.backends.cutlass_build import build, find_headers
from kplay.kernels.catalog import load_catalog
from kplay.kernels.models import RunJob, RunState
from kplay.kernels.problem import backend_for_path

TEMPLATED = """\
#include <cute/tensor.hpp>
using namespace cute;

template <int Width>
__global__ void scale(float* x, int n) {
    Tensor t = make_tensor(make_gmem_ptr(x), make_shape(n));
    int i = blockIdx.x * Width + threadIdx.x;
    if (i < n) t(i) = 2.0f * t(i);
}
"""

BROKEN = """\
#include <cute/tensor.hpp>

extern "C" __global__ void vector_add(const float* a, const float* b, float* out, int n) {
    auto t = cute::make_tensor(cute::make_gmem_ptr(out), cute::make_shape(n));
    t(0) = a[0] + b[0] + undeclared_value;
}
"""


def _backend(tmp_path: Path) -> CutlassBackend:
    backend = CutlassBackend(arch="sm_90a", cache_dir=tmp_path / "cache")
    reason = backend.missing()
    if reason is not None:
        pytest.skip(reason)
    return backend


def test_file_names_pick_the_backend_by_the_longest_suffix() -> None:
    assert backend_for_path(Path("gemm.cutlass.cu")) == "cutlass"
    assert backend_for_path(Path("gemm.cu")) == "cuda"
    assert backend_for_path(Path("gemm.triton.py")) == "triton"


def test_hopper_and_later_get_the_arch_specific_target() -> None:
    assert cutlass_arch("9.0") == "sm_90a"
    assert cutlass_arch("sm_90a") == "sm_90a"
    assert cutlass_arch("100") == "sm_100a"
    assert cutlass_arch("8.0") == "sm_80"


def test_without_headers_the_backend_is_unavailable_and_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KPLAY_ENGINE_CUTLASS_INCLUDE", str(tmp_path))  # no cute/ in it
    backend = CutlassBackend(cache_dir=tmp_path / "cache")
    assert backend.capability() is Capability.unavailable
    stage, kernel = backend.compile(TEMPLATED, "scale<128>", tmp_path)
    assert kernel is None and not stage.ok
    assert "nvidia-cutlass" in stage.diagnostics[0].message


def test_the_wheel_headers_are_found_with_their_version(tmp_path: Path) -> None:
    _backend(tmp_path)
    headers = find_headers()
    assert headers is not None and (headers.include / "cutlass" / "gemm").is_dir()
    assert headers.version.count(".") == 2 and headers.version[0].isdigit()
    assert get_backend("cutlass").versions()["cutlass"] == headers.version


def test_a_templated_kernel_is_found_under_its_mangled_name(tmp_path: Path) -> None:
    backend = _backend(tmp_path)
    result = build(
        TEMPLATED, "scale<128>", "sm_90a", nvcc=backend_nvcc(), headers=find_headers(),
        workdir=tmp_path, cache_dir=tmp_path / "cache", timeout_s=backend.nvcc_timeout_s,
    )  # fmt: skip
    assert result.stage.ok, result.stage.log
    assert result.entry and result.entry.startswith("_Z5scaleILi128EEvPfi")
    assert result.image and result.image[:4] == b"\x7fELF"
    assert result.params == ["x", "n"]
    assert result.stage.resources and result.stage.resources[0].arch == "sm_90a"
    assert "CUTLASS" in (result.stage.compiler or "")


def backend_nvcc() -> Path:
    from kplay.kernels.backends.cutlass import _nvcc

    nvcc = _nvcc()
    assert nvcc is not None
    return nvcc


def test_an_error_points_at_the_learners_line_and_the_cache_skips_nvcc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = _backend(tmp_path)
    stage, kernel = backend.compile(BROKEN, "vector_add", tmp_path / "one")
    assert not stage.ok and kernel is None
    errors = [d for d in stage.diagnostics if d.severity == "error"]
    assert errors and errors[0].line == 5 and "undeclared_value" in errors[0].message

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("nvcc ran again for a source already compiled")

    monkeypatch.setattr("kplay.kernels.backends.cutlass_build.RunningTool", refuse)
    again, _ = backend.compile(BROKEN, "vector_add", tmp_path / "two")
    assert not again.ok and [d.line for d in again.diagnostics if d.severity == "error"][0] == 5


def _solution(slug: str, name: str) -> str:
    return (load_catalog()[slug].folder / "solutions" / "correct" / name).read_text()


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name", ["gemm_bf16_collective.cutlass.cu", "gemm_bf16_cute_mma.cutlass.cu"]
)
def test_the_gemms_pass_the_checker_through_the_box_and_are_timed(name: str) -> None:
    from kplay.kernels.evaluate import evaluate
    from kplay.kernels.remote import spawn_plain_box

    if get_backend("cutlass").capability() is not Capability.run:
        pytest.skip("needs a GPU with CuPy, nvcc and the CUTLASS headers")
    job = RunJob(
        problem="gemm_bf16", backend="cutlass", source=_solution("gemm_bf16", name),
        mode="full", seed=7, timing_cap_s=0.5,
    )  # fmt: skip
    client, proc = spawn_plain_box()
    try:
        result = evaluate(job, box=client)
    finally:
        client.close()
        proc.wait(timeout=30)
    assert result.state is RunState.done, f"{result.state}: {result.message}"
    assert result.check and result.check.ok and len(result.check.cases) >= 7
    assert result.timing and result.timing.timed
    assert result.compile and result.compile.resources[0].arch == "sm_90a"
