"""Hopper launch lines: arch-specific targets, thread-block clusters and TMA descriptors.

The parsing and the checks run anywhere; the launches themselves are the solutions
under kernels/problems (vector_add_tma.cu, reduce_sum_cluster_dsmem.cu,
hgemm_wgmma_sm90a.cu), which tests/kernels/test_solutions.py runs on a GPU.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kplay.kernels import tma
from kplay.kernels.backends.cuda_source import runs_on
from kplay.kernels.catalog import PROBLEMS_DIR, get_problem
from kplay.kernels.evaluate import evaluate
from kplay.kernels.launch import LaunchError, plan, requested_arch, resolve
from kplay.kernels.models import RunJob, RunState

ARGS = [("a", "float32"), ("b", "float32"), ("out", "float32"), ("n", "int32")]


def _plan(line: str):  # type: ignore[no-untyped-def]
    return plan(get_problem("vector_add").launch["cuda"], f"// kplay: {line}\n", None)


def test_a_launch_line_names_an_arch_a_cluster_and_tensor_maps() -> None:
    p = _plan(
        "arch=sm_90a grid=ceil_div(n,8192) block=128 cluster=(2,1) "
        "tma.a=(256) tma.out=(BOX) tma.out.swizzle=none tma.out.l2=128B BOX=256"
    )
    assert p.arch == "sm_90a"
    spec = resolve(p, {"n": 1 << 20}, ARGS)
    assert spec.grid == (128,) and spec.cluster == (2, 1)
    maps = {m.name: m for m in spec.tensor_maps}
    assert maps["a"] == tma.TensorMapSpec(name="a", box=(256,), index=0, dtype="float32")
    assert maps["out"].box == (256,) and maps["out"].l2 == "128B" and maps["out"].index == 2
    assert "BOX" in spec.constants  # ordinary constants still work beside them


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("arch=sm_9x", "not a CUDA architecture"),
        ("tma.a.swizzle=96B", "tma.a.swizzle=96B: choose one of none, 32B, 64B, 128B"),
        ("tma.a.colour=red", "tma.a.colour: unknown option"),
        ("tma.a.b.c=1", "write tma.<array>=(box)"),
    ],
)
def test_bad_launch_lines_are_refused_with_words(line: str, words: str) -> None:
    with pytest.raises(LaunchError, match="line 1: kplay directive") as err:
        _plan(line)
    assert words in str(err.value)


def test_a_tensor_map_must_name_an_argument_and_give_a_box() -> None:
    with pytest.raises(LaunchError, match=r"tma.x: no argument named x \(arguments: a, b, out"):
        resolve(_plan("tma.x=(256)"), {"n": 64}, ARGS)
    with pytest.raises(LaunchError, match=r"give the box, e.g. tma.a=\(64,64\)"):
        resolve(_plan("tma.a.swizzle=32B"), {"n": 64}, ARGS)


@pytest.mark.parametrize(
    ("spec", "shape", "words"),
    [
        (tma.TensorMapSpec("A", (64, 64), dtype="float32"), (128,), "box has 2 dimension"),
        (tma.TensorMapSpec("A", (300,), dtype="float32"), (4096,), "outside 1..256"),
        (tma.TensorMapSpec("A", (2, 3), dtype="float32"), (8, 8), "multiples of 16 bytes"),
        (tma.TensorMapSpec("A", (8, 8), dtype="float32"), (8, 3), "every stride"),
        (
            tma.TensorMapSpec("A", (64, 64), swizzle="64B", dtype="float16"),
            (128, 128),
            "with swizzle=64B the box's last dimension may be at most 64 bytes; it is 128",
        ),
        (tma.TensorMapSpec("A", (64,), dtype="complex64"), (64,), "TMA copies"),
    ],
)
def test_tensor_maps_the_driver_would_refuse_are_explained_first(
    spec: tma.TensorMapSpec, shape: tuple[int, ...], words: str
) -> None:
    with pytest.raises(tma.TmaError) as err:
        tma.check_spec(spec, shape)
    assert words in str(err.value)


def test_a_legal_tensor_map_passes_its_checks() -> None:
    tma.check_spec(tma.TensorMapSpec("A", (64, 64), swizzle="128B", dtype="float16"), (512, 256))
    tma.check_spec(tma.TensorMapSpec("x", (256,), dtype="float32"), (1,))  # OOB reads as 0


def test_clusters_must_tile_the_grid() -> None:
    assert tma.check_cluster((2,), (8,)) == (2, 1, 1)
    with pytest.raises(tma.TmaError, match=r"the grid's x \(7\) is not a multiple"):
        tma.check_cluster((2,), (7,))
    with pytest.raises(tma.TmaError, match="at most 16"):
        tma.check_cluster((4, 4, 2), (8, 8, 2))


def test_arch_specific_code_runs_only_where_it_was_built_for() -> None:
    assert runs_on("sm_90a", "sm_90") and runs_on("sm_90", "sm_90")
    assert not runs_on("sm_90a", "sm_100") and not runs_on("sm_90a", "sm_80")
    assert runs_on("sm_80", "sm_86") and not runs_on("sm_86", "sm_80")
    assert requested_arch("// kplay: arch=90a block=128\n") == "sm_90a"
    assert requested_arch("// kplay: block=128\n") is None


def test_other_backends_refuse_cuda_launch_words() -> None:
    source = (
        "# kplay: cluster=(2)\nimport numba\n\n@numba.njit\ndef vector_add(a, b, out, n):\n"
        "    for i in range(n):\n        out[i] = a[i] + b[i]\n"
    )
    result = evaluate(RunJob(problem="vector_add", backend="numba-cpu", source=source))
    assert result.state is RunState.compile_error
    assert result.message == (
        "arch=, cluster= and tma. in the launch line are for CUDA C++ cells; "
        "Numba (CPU) chooses its own target and launch"
    )


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_wgmma_kernel_without_a_gpu_is_built_for_sm_90a_and_uses_hgmma() -> None:
    path = Path(PROBLEMS_DIR) / "hgemm_wmma/solutions/correct/hgemm_wgmma_sm90a.cu"
    job = RunJob(problem="hgemm_wmma", backend="cuda", source=path.read_text(), mode="compile")
    result = evaluate(job)
    assert result.state is RunState.compiled, result.message
    assert result.compile is not None and result.compile.sass, result.compile
    assert "HGMMA.64x64x16.F32" in result.compile.sass, result.compile.sass[:2000]
    assert ".target sm_90a" in (result.compile.ptx or ""), (result.compile.ptx or "")[:500]


def test_a_folder_without_a_single_file_is_not_a_problem(tmp_path: Path) -> None:
    from kplay.kernels.catalog import ProblemLoadError
    from kplay.kernels.folder import problem_folders

    (tmp_path / "empty" / "solutions" / "correct").mkdir(parents=True)
    assert problem_folders(tmp_path, ProblemLoadError) == []
    (tmp_path / "empty" / "solutions" / "correct" / "x.cu").write_text("")
    with pytest.raises(ProblemLoadError, match="missing problem.toml"):
        problem_folders(tmp_path, ProblemLoadError)
