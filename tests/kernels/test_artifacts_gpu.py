"""Kernel images built in a box that sees no GPU, loaded and launched here on the GPU.

Every case builds as production does (tests.kernels.artifact_builds: CUDA shown no
device, the target named by this process's GPU), all in one child process, then loads
the image with the backend's load() and launches it on the problem's inputs with the
problem's launch, and compares the outputs with the problem's reference within its
tolerance. Needs a CUDA GPU, CuPy, torch and Triton.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kplay.kernels import launch
from kplay.kernels.arrays import ArrayOps, poison_value
from kplay.kernels.artifact import Artifact, Variant
from kplay.kernels.backends.base import Capability, KernelError, LaunchSpec, get_backend
from kplay.kernels.catalog import get_problem
from kplay.kernels.check import shape_of
from kplay.kernels.draws import Draws
from kplay.kernels.remote import variant_of
from tests.kernels.artifact_builds import build_in_box
from tests.kernels.test_artifacts import MIXED, MIXED_ARGS, TOTAL

pytestmark = pytest.mark.gpu

# (problem, backend, solution, case parameters)
CASES = {
    "numba-vector_add": ("vector_add", "numba-cuda", "correct/vector_add.numba_cuda.py",
                         {"n": 1000003}),
    "numba-saxpy": ("saxpy", "numba-cuda", "correct/saxpy.numba_cuda.py", {"n": 4099}),
    "numba-softmax": ("softmax", "numba-cuda", "correct/softmax_three_pass.numba_cuda.py",
                      {"rows": 64, "cols": 1000}),
    "numba-transpose": ("transpose", "numba-cuda",
                        "correct/transpose_tiled_padded.numba_cuda.py", {"rows": 65, "cols": 97}),
    "numba-sgemm": ("sgemm", "numba-cuda", "correct/sgemm_tiled.numba_cuda.py",
                    {"M": 257, "N": 129, "K": 300}),
    "numba-sum": ("sum", "numba-cuda", "correct/reduce_sum.numba_cuda.py", {"n": 10007}),
    "numba-wrong": ("vector_add", "numba-cuda", "wrong/grid_rounded_down.numba_cuda.py",
                    {"n": 1000}),
    "triton-vector_add": ("vector_add", "triton", "correct/vector_add.triton.py",
                          {"n": 1000003}),
    "triton-vector_add-16": ("vector_add", "triton", "correct/vector_add.triton.py",
                             {"n": 4096}),
    "triton-saxpy": ("saxpy", "triton", "correct/saxpy.triton.py", {"n": 4099}),
    "triton-softmax": ("softmax", "triton", "correct/softmax_online.triton.py",
                       {"rows": 64, "cols": 1000}),
    "triton-softmax-one-col": ("softmax", "triton", "correct/softmax_online.triton.py",
                               {"rows": 5, "cols": 1}),
    "triton-transpose": ("transpose", "triton", "correct/transpose_blocked.triton.py",
                         {"rows": 65, "cols": 97}),
    "triton-sgemm": ("sgemm", "triton", "correct/sgemm_blocked.triton.py",
                     {"M": 257, "N": 129, "K": 300}),
    "triton-sum": ("sum", "triton", "correct/reduce_sum_persistent.triton.py", {"n": 10007}),
    "triton-wrong": ("vector_add", "triton", "wrong/no_program_offset.triton.py", {"n": 5000}),
}  # fmt: skip
PROBLEMS = Path(__file__).resolve().parents[2] / "kernels" / "problems"


@dataclass
class Case:
    problem: Any
    backend: str
    source: str
    kernel: str
    spec: LaunchSpec
    params: dict[str, Any]
    ops: ArrayOps
    args: list[Any] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    expected: dict[str, np.ndarray] = field(default_factory=dict)


def _case(slug: str, backend: str, path: str, params: dict[str, Any]) -> Case:
    problem = get_problem(slug)
    source = (PROBLEMS / slug / "solutions" / path).read_text()
    plan = launch.plan(problem.launch[backend], source, None)
    kind = get_backend(backend).array_kind()
    case = Case(problem, backend, source, plan.kernel, launch.resolve(plan, params), params,
                ArrayOps(kind))  # fmt: skip
    inputs = problem.reference.generate(params, Draws(1234))
    case.expected = problem.reference.reference(inputs, params)
    for arg in problem.args:
        dtype = np.dtype(arg.dtype)
        if arg.is_array:
            host = inputs.get(arg.name)
            if host is None:
                fill = 0 if arg.init == "zeros" else poison_value(dtype)
                host = np.full(shape_of(problem, arg.name, params), fill, dtype=dtype)
            dev = case.ops.to_device(np.asarray(host, dtype=dtype))
            case.args.append(dev)
            if arg.role in ("out", "inout"):
                case.outputs[arg.name] = dev
        else:
            value = inputs[arg.name] if arg.role == "scalar" else params[arg.name]
            case.args.append(dtype.type(value))
    return case


def _job(case: Case, source: str | None = None, kernel: str | None = None) -> dict[str, Any]:
    from kplay.kernels.hardware import current_gpu

    variant = variant_of(case.backend, case.args, case.spec)
    return {
        "backend": case.backend,
        "source": source or case.source,
        "kernel": kernel or case.kernel,
        "target_cc": current_gpu().compute_capability,
        "variants": [variant.model_dump(mode="json")],
    }


def _build_one(tmp: Path, backend: str, source: str, kernel: str, variant: Variant) -> Any:
    """Build one variant in a box and load it here."""
    from kplay.kernels.hardware import current_gpu

    job = {
        "backend": backend,
        "source": source,
        "kernel": kernel,
        "target_cc": current_gpu().compute_capability,
        "variants": [variant.model_dump(mode="json")],
    }
    (answer,) = build_in_box([job], tmp)
    return get_backend(backend).load(Artifact.model_validate(answer["builds"][0]["artifact"]))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Case, Artifact]]:
    for key in ("numba-cuda", "triton"):
        assert get_backend(key).capability() is Capability.run, key
        assert get_backend(key).exports()
    cases = {name: _case(*spec) for name, spec in CASES.items()}
    answers = build_in_box([_job(c) for c in cases.values()], tmp_path_factory.mktemp("builds"))
    out = {}
    for (name, case), answer in zip(cases.items(), answers, strict=True):
        (build,) = answer["builds"]
        assert "artifact" in build, (name, build)
        out[name] = (case, Artifact.model_validate(build["artifact"]))
    return out


def _run(case: Case, artifact: Artifact) -> Any:
    kernel = get_backend(case.backend).load(artifact)
    kernel.launch(case.args, case.spec)
    case.ops.synchronize()
    return kernel


def _compare(case: Case) -> None:
    for name, dev in case.outputs.items():
        got, want = case.ops.to_host(dev), case.expected[name]
        tol = case.problem.tolerance.get(str(want.dtype))
        if tol is None:
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:
            np.testing.assert_allclose(got, want, atol=tol.atol, rtol=tol.rtol, err_msg=name)


@pytest.mark.parametrize("name", [n for n in CASES if not n.endswith("wrong")])
def test_loaded_image_computes_the_reference(built: dict, name: str) -> None:
    case, artifact = built[name]
    kernel = _run(case, artifact)
    _compare(case)
    assert kernel.parameters() == artifact.abi["parameters"]


@pytest.mark.parametrize("name", ["numba-wrong", "triton-wrong"])
def test_loaded_image_of_a_wrong_solution_is_wrong(built: dict, name: str) -> None:
    case, artifact = built[name]
    _run(case, artifact)
    with pytest.raises(AssertionError):
        _compare(case)


def test_specialised_images_are_the_ones_triton_would_launch(built: dict) -> None:
    one = built["triton-softmax-one-col"][1]
    assert one.abi["args"][3]["constant"] == 1  # cols == 1 compiled in
    sixteen = built["triton-vector_add-16"][1]
    assert sixteen.abi["args"][3]["aligned"] and "constant" not in sixteen.abi["args"][3]
    sgemm = built["triton-sgemm"][1]
    if sgemm.abi["shared"] > 48 * 1024:  # launched above, after opting in
        assert sgemm.stage.resources[0].shared_bytes == sgemm.abi["shared"]


def test_a_triton_image_refuses_arguments_it_was_not_built_for(built: dict) -> None:
    case, artifact = built["triton-softmax-one-col"]
    kernel = get_backend("triton").load(artifact)
    args = list(case.args)
    args[3] = np.int32(2)
    with pytest.raises(KernelError, match="built for 1"):
        kernel.launch(args, case.spec)


def test_numba_scalars_of_every_kind(tmp_path: Path) -> None:
    import cupy

    n = 100
    out = cupy.full(n, np.nan, dtype=np.float64)
    args = [out, np.float32(1.5), np.int64(2**40), np.complex64(3 + 4j), np.bool_(False)]
    spec = LaunchSpec("mixed", grid=(1,), block=(128,))
    # Built from the types alone: the evaluator's variants carry no complex values.
    kernel = _build_one(tmp_path, "numba-cuda", MIXED, "mixed", Variant(args=MIXED_ARGS))
    kernel.launch(args, spec)
    np.testing.assert_array_equal(cupy.asnumpy(out), np.full(n, -(1.5 + 2**40 + 3 - 4)))


DYNAMIC = """from numba import cuda, float32


@cuda.jit
def reverse(x, out, n):
    buf = cuda.shared.array(0, dtype=float32)
    j = cuda.threadIdx.x
    while j < n:
        buf[j] = x[j]
        j += cuda.blockDim.x
    cuda.syncthreads()
    j = cuda.threadIdx.x
    while j < n:
        out[j] = buf[n - 1 - j]
        j += cuda.blockDim.x
"""


def test_numba_dynamic_shared_memory_past_48_kib(tmp_path: Path) -> None:
    import cupy

    n = 16384  # 64 KiB of float32
    x = cupy.asarray(np.random.default_rng(5).standard_normal(n, dtype=np.float32))
    out = cupy.full(n, np.nan, dtype=np.float32)
    args = [x, out, np.int32(n)]
    spec = LaunchSpec("reverse", grid=(1,), block=(256,), shared_mem_bytes=4 * n)
    variant = variant_of("numba-cuda", args, spec)
    kernel = _build_one(tmp_path, "numba-cuda", DYNAMIC, "reverse", variant)
    kernel.launch(args, spec)
    np.testing.assert_array_equal(cupy.asnumpy(out), cupy.asnumpy(x)[::-1])
    too_much = LaunchSpec("reverse", grid=(1,), block=(256,), shared_mem_bytes=1 << 20)
    with pytest.raises(KernelError, match="shared memory"):
        kernel.launch(args, too_much)


def test_autotuned_triton_kernel_keeps_the_fastest_config(tmp_path: Path) -> None:
    """reset_to_zero is honoured while timing: the sum is right after the first launch."""
    import torch

    n = 1 << 20
    host = np.random.default_rng(9).standard_normal(n, dtype=np.float32)
    x = torch.from_numpy(host).cuda()
    out = torch.zeros(1, dtype=torch.float32, device="cuda")
    args = [x, out, np.int32(n)]
    spec = LaunchSpec("total", grid=(132,))
    kernel = _build_one(tmp_path, "triton", TOTAL, "total", variant_of("triton", args, spec))
    kernel.launch(args, spec)
    torch.cuda.synchronize()
    want = float(host.astype(np.float64).sum())
    assert abs(out.item() - want) <= 1e-4 * np.abs(host).sum()
    chosen = kernel.chosen
    assert chosen is not None and len(kernel.timings) == 2
    assert "autotune kept" in kernel.report().log
    out.zero_()
    kernel.launch(args, spec)  # no second tuning: the same config, one launch
    torch.cuda.synchronize()
    assert kernel.chosen is chosen and len(kernel.timings) == 2
    assert abs(out.item() - want) <= 1e-4 * np.abs(host).sum()
