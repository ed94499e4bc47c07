"""The Python backends: Numba on the CPU, Numba CUDA and Triton.

Without a GPU these run on the CPU paths (Numba's CUDA simulator, Triton's interpreter);
on a GPU the same tests launch on the device, and the `gpu` tests check the resource
reports. Sizes stay at a few hundred threads: the simulator runs each one as a thread.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from kplay.kernels.arrays import ArrayOps
from kplay.kernels.backends.base import (
    Backend,
    Capability,
    CompiledKernel,
    DeferredCompileError,
    LaunchSpec,
    get_backend,
)

N = 150  # not a multiple of the block size: the tail must be masked
KEYS = ["numba-cpu", "numba-cuda", "triton"]

VECTOR_ADD = {
    "numba-cpu": """import numba


@numba.njit
def add(x, y, out, n):
    for i in range(n):
        out[i] = x[i] + y[i]
""",
    "numba-cuda": """from numba import cuda


@cuda.jit
def add(x, y, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i] + y[i]
""",
    "triton": """import triton
import triton.language as tl


@triton.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)
""",
}
# The line holding the addition, where the error tests plant their mistakes.
SUM_LINE = {"numba-cpu": 7, "numba-cuda": 8, "triton": 11}
SUM = {"numba-cpu": "x[i] + y[i]", "numba-cuda": "x[i] + y[i]", "triton": "x + y"}
LAUNCH = {
    "numba-cpu": LaunchSpec("add"),
    "numba-cuda": LaunchSpec("add", grid=(3,), block=(64,)),
    "triton": LaunchSpec("add", grid=(3,), num_warps=2, constants={"BLOCK": 64}),
}
PARAMS = {
    "numba-cpu": ["x", "y", "out", "n"],
    "numba-cuda": ["x", "y", "out", "n"],
    "triton": ["x_ptr", "y_ptr", "out_ptr", "n"],
}
DECORATOR = {"numba-cpu": "@numba.njit", "numba-cuda": "@cuda.jit", "triton": "@triton.jit"}


def backend_for(key: str) -> Backend:
    backend = get_backend(key)
    if backend.capability() in (Capability.unavailable, Capability.compile_only):
        pytest.skip(f"{key} cannot run on this machine")
    return backend


def compiled(key: str, source: str, workdir: Path) -> CompiledKernel:
    stage, kernel = backend_for(key).compile(source, "add", workdir)
    assert stage.ok, stage.log
    assert kernel is not None
    return kernel


def launch_add(key: str, kernel: CompiledKernel) -> np.ndarray:
    """Launch on fresh inputs and return the output on the host."""
    ops = ArrayOps(get_backend(key).array_kind())
    rng = np.random.default_rng(7)
    x = rng.standard_normal(N).astype(np.float32)
    y = rng.standard_normal(N).astype(np.float32)
    args = [ops.to_device(x), ops.to_device(y), ops.empty_like_poisoned((N,), x.dtype, False)]
    kernel.launch([*args, np.int32(N)], LAUNCH[key])
    out = ops.to_host(args[2])
    np.testing.assert_allclose(out, x + y, rtol=1e-6)
    return out


def deferred(key: str, source: str, workdir: Path) -> DeferredCompileError:
    kernel = compiled(key, source, workdir)
    with pytest.raises(DeferredCompileError) as info:
        launch_add(key, kernel)
    return info.value


# ---------------------------------------------------------------- every backend


@pytest.mark.parametrize("key", KEYS)
def test_vector_add_compiles_and_runs(key: str, tmp_path: Path) -> None:
    kernel = compiled(key, VECTOR_ADD[key], tmp_path)
    out = launch_add(key, kernel)
    assert not np.isnan(out).any()


@pytest.mark.parametrize("key", KEYS)
def test_syntax_error_points_at_its_line(key: str, tmp_path: Path) -> None:
    source = VECTOR_ADD[key].replace(SUM[key], SUM[key] + " +")
    stage, kernel = backend_for(key).compile(source, "add", tmp_path)
    assert kernel is None and not stage.ok
    assert stage.diagnostics[0].line == SUM_LINE[key]
    assert "SyntaxError" in stage.diagnostics[0].message


@pytest.mark.parametrize("key", KEYS)
def test_error_while_loading_points_at_its_line(key: str, tmp_path: Path) -> None:
    source = VECTOR_ADD[key] + "\nSCALE = 1 / 0\n"
    stage, kernel = backend_for(key).compile(source, "add", tmp_path)
    assert kernel is None and not stage.ok
    diag = stage.diagnostics[0]
    assert diag.line == source.count("\n")
    assert "ZeroDivisionError" in diag.message


@pytest.mark.parametrize("key", KEYS)
def test_unknown_name_fails_at_first_launch_with_its_line(key: str, tmp_path: Path) -> None:
    source = VECTOR_ADD[key].replace(SUM[key], SUM[key] + " * scale")
    error = deferred(key, source, tmp_path)
    assert not error.stage.ok
    diag = error.stage.diagnostics[0]
    assert diag.line == SUM_LINE[key]
    assert "scale" in diag.message
    assert "/" not in diag.message.split("\n")[0], "a temporary folder leaked into the message"


@pytest.mark.parametrize("key", KEYS)
def test_missing_kernel_name(key: str, tmp_path: Path) -> None:
    stage, kernel = backend_for(key).compile(VECTOR_ADD[key], "vector_add", tmp_path)
    assert kernel is None and not stage.ok
    message = stage.diagnostics[0].message
    assert "no function named vector_add in your source" in message
    assert "add" in message.split("defines:")[-1]  # and it names what the source does define


@pytest.mark.parametrize("key", KEYS)
def test_plain_function_is_refused_with_the_decorator_to_use(key: str, tmp_path: Path) -> None:
    source = "import math\n\n\ndef add(x, y, out, n):\n    pass\n"
    stage, kernel = backend_for(key).compile(source, "add", tmp_path)
    assert kernel is None and not stage.ok
    diag = stage.diagnostics[0]
    assert "plain Python function" in diag.message
    assert DECORATOR[key] in diag.message
    assert diag.line == 4


@pytest.mark.parametrize("key", KEYS)
def test_parameters_are_the_runtime_arguments(key: str, tmp_path: Path) -> None:
    assert compiled(key, VECTOR_ADD[key], tmp_path).parameters() == PARAMS[key]


@pytest.mark.parametrize("key", KEYS)
def test_learner_modules_do_not_leak(key: str, tmp_path: Path) -> None:
    source = VECTOR_ADD[key] + "\nSEEN = []\n"
    first = compiled(key, source, tmp_path)
    second = compiled(key, source, tmp_path)
    assert not [m for m in sys.modules if m.startswith("kplay_learner_")]
    globals_of = [k.__dict__.get("dispatcher", k.__dict__.get("kernel")) for k in (first, second)]
    from kplay.kernels.backends.pysource import python_function

    one, two = (python_function(g).__globals__ for g in globals_of)
    assert one is not two and one["SEEN"] is not two["SEEN"]


@pytest.mark.parametrize("key", KEYS)
def test_versions_name_the_library(key: str) -> None:
    versions = get_backend(key).versions()
    assert {"numba-cpu": "numba", "numba-cuda": "numba-cuda", "triton": "triton"}[key] in versions


# ---------------------------------------------------------------- Numba on the CPU


def test_numba_cpu_reports_its_threads(tmp_path: Path) -> None:
    import numba

    serial = compiled("numba-cpu", VECTOR_ADD["numba-cpu"], tmp_path)
    assert serial.threads == 1  # type: ignore[attr-defined]
    source = VECTOR_ADD["numba-cpu"].replace("@numba.njit", "@numba.njit(parallel=True)")
    source = source.replace("range(n)", "numba.prange(n)")
    parallel = compiled("numba-cpu", source, tmp_path)
    launch_add("numba-cpu", parallel)
    assert parallel.threads == numba.get_num_threads()  # type: ignore[attr-defined]
    report = parallel.report()
    assert report is not None and report.ok and "threads" in report.log


def test_numba_cpu_type_error_names_line(tmp_path: Path) -> None:
    source = VECTOR_ADD["numba-cpu"].replace("x[i] + y[i]", "x[i] + 'one'")
    error = deferred("numba-cpu", source, tmp_path)
    assert error.stage.diagnostics[0].line == SUM_LINE["numba-cpu"]
    assert error.stage.diagnostics[0].message.startswith("TypingError")
    assert "Failed in nopython mode" not in error.stage.diagnostics[0].message


def test_numba_cpu_error_in_a_helper_points_into_the_helper(tmp_path: Path) -> None:
    source = VECTOR_ADD["numba-cpu"].replace("x[i] + y[i]", "twice(x[i]) + y[i]")
    source += '\n\n@numba.njit\ndef twice(v):\n    return v + "two"\n'
    error = deferred("numba-cpu", source, tmp_path)
    assert error.stage.diagnostics[0].line == source.count("\n")


def test_lost_numba_location_is_found_in_compiler_frames(tmp_path: Path) -> None:
    """Numba CUDA can drop an error's location; the compiler's frames still hold it."""
    from numba.core import ir
    from numba.core.errors import NumbaError

    from kplay.kernels.backends.pysource import numba_error

    path = tmp_path / "kplay_src.py"

    def typing_step() -> None:
        statement_loc = ir.Loc(str(path), 8)  # what a typing frame holds  # noqa: F841
        raise NumbaError("NameError: name 'scale' is not defined")

    with pytest.raises(NumbaError) as info:
        typing_step()
    error = numba_error(info.value, path, None)
    assert error.stage.diagnostics[0].line == 8


def test_numba_cpu_refuses_a_cuda_kernel(tmp_path: Path) -> None:
    stage, kernel = backend_for("numba-cpu").compile(VECTOR_ADD["numba-cuda"], "add", tmp_path)
    assert kernel is None
    assert "@cuda.jit" in stage.diagnostics[0].message
    assert "@numba.njit" in stage.diagnostics[0].message


# ---------------------------------------------------------------- Numba CUDA


def test_numba_cuda_type_error_names_line(tmp_path: Path) -> None:
    # The simulator raises NumPy's ufunc error here, an exception it cannot re-raise.
    source = VECTOR_ADD["numba-cuda"].replace("x[i] + y[i]", "x[i] + 'one'")
    error = deferred("numba-cuda", source, tmp_path)
    assert error.stage.diagnostics[0].line == SUM_LINE["numba-cuda"]


def test_numba_cuda_refuses_device_and_cpu_functions(tmp_path: Path) -> None:
    backend = backend_for("numba-cuda")
    device = VECTOR_ADD["numba-cuda"].replace("@cuda.jit", "@cuda.jit(device=True)")
    stage, kernel = backend.compile(device, "add", tmp_path)
    assert kernel is None and "device function" in stage.diagnostics[0].message
    stage, kernel = backend.compile(VECTOR_ADD["numba-cpu"], "add", tmp_path)
    assert kernel is None and "@numba.njit" in stage.diagnostics[0].message


def test_numba_cuda_simulated_runtime_error_stays_a_runtime_error(tmp_path: Path) -> None:
    backend = backend_for("numba-cuda")
    if backend.capability() is not Capability.simulate:
        pytest.skip("on a GPU an out-of-bounds read raises nothing")
    source = VECTOR_ADD["numba-cuda"].replace("x[i] + y[i]", "x[i + 4096] + y[i]")
    kernel = compiled("numba-cuda", source, tmp_path)
    with pytest.raises(IndexError):
        launch_add("numba-cuda", kernel)


def test_numba_cuda_needs_a_grid_and_block(tmp_path: Path) -> None:
    from kplay.kernels.backends.base import KernelError

    kernel = compiled("numba-cuda", VECTOR_ADD["numba-cuda"], tmp_path)
    with pytest.raises(KernelError):
        kernel.launch([], LaunchSpec("add"))


@pytest.mark.gpu
def test_numba_cuda_reports_resources_after_first_launch(tmp_path: Path) -> None:
    kernel = compiled("numba-cuda", VECTOR_ADD["numba-cuda"], tmp_path)
    assert kernel.report() is None  # nothing is compiled before the first launch
    launch_add("numba-cuda", kernel)
    report = kernel.report()
    assert report is not None and report.ok
    res = report.resources[0]
    assert res.registers and res.registers > 0
    assert res.arch and res.arch.startswith("sm_")
    assert report.ptx and ".entry" in report.ptx


# ---------------------------------------------------------------- Triton


def test_triton_error_in_a_helper_points_into_the_helper(tmp_path: Path) -> None:
    source = VECTOR_ADD["triton"].replace("x + y, mask", "twice(x) + y, mask")
    source += "\n\n@triton.jit\ndef twice(v):\n    return v * two\n"
    error = deferred("triton", source, tmp_path)
    assert error.stage.diagnostics[0].line == source.count("\n")


def test_triton_static_shape_error_is_a_compile_error(tmp_path: Path) -> None:
    source = VECTOR_ADD["triton"].replace("tl.arange(0, BLOCK)", "tl.arange(0, 100)")
    error = deferred("triton", source, tmp_path)
    assert error.stage.diagnostics[0].line == 7
    assert "power of 2" in error.stage.diagnostics[0].message


def test_triton_compilation_error_is_placed_in_the_file() -> None:
    """A GPU compile's error counts lines from the `def`; the backend maps them to the file."""
    import ast

    from triton.compiler.errors import CompilationError

    from kplay.kernels.backends.triton_backend import _compilation_error

    source = VECTOR_ADD["triton"]
    src = source[source.index("def add") :]
    node = ast.parse("scale").body[0]
    node.lineno, node.col_offset = 6, 4  # the `tl.store` line, counted from the def (1)
    inner = CompilationError(src, node, "NameError('scale is not defined')")
    try:
        try:
            raise inner
        except CompilationError as exc:
            raise CompilationError(src, node, None) from exc
    except CompilationError as outer:
        error = _compilation_error(outer, Path("kplay_src.py"), source)
    assert error.stage.diagnostics[0].line == SUM_LINE["triton"]
    assert "scale is not defined" in error.stage.diagnostics[0].message


def test_triton_autotuned_kernel_runs(tmp_path: Path) -> None:
    configs = '[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})]'
    source = VECTOR_ADD["triton"].replace(
        "@triton.jit", f'@triton.autotune(configs={configs}, key=["n"])\n@triton.jit'
    )
    kernel = compiled("triton", source, tmp_path)
    assert kernel.parameters() == PARAMS["triton"]
    launch_add("triton", kernel)  # LAUNCH's BLOCK is the autotuner's to choose: dropped


def test_triton_refuses_a_numba_kernel(tmp_path: Path) -> None:
    stage, kernel = backend_for("triton").compile(VECTOR_ADD["numba-cpu"], "add", tmp_path)
    assert kernel is None and "@triton.jit" in stage.diagnostics[0].message


@pytest.mark.gpu
def test_triton_reports_resources_after_first_launch(tmp_path: Path) -> None:
    kernel = compiled("triton", VECTOR_ADD["triton"], tmp_path)
    assert kernel.report() is None
    launch_add("triton", kernel)
    report = kernel.report()
    assert report is not None and report.ok
    res = report.resources[0]
    assert res.registers and res.registers > 0
    assert res.shared_bytes is not None
    assert res.arch and res.arch.startswith("sm_")
    assert report.ptx and ".entry" in report.ptx
