"""A Triton kernel run in the interpreter still shows what Triton builds for a GPU: after
its check, the kernel is compiled (not run) for the engine's CUDA target, and its TTIR,
TTGIR, LLVM IR, PTX and SASS join the run's compile stage."""

from __future__ import annotations

from pathlib import Path

import pytest

from kplay.kernels.backends.lineinfo import line_map
from kplay.kernels.backends.triton_listings import (
    interpreted_listings,
    launch_variant,
    plain,
    plain_variant,
    target_cc,
)
from kplay.kernels.catalog import PROBLEMS_DIR
from kplay.kernels.hardware import has_cuda_gpu
from kplay.kernels.models import RunJob, RunState

SOLUTION = Path(PROBLEMS_DIR) / "vector_add" / "solutions" / "correct" / "vector_add.triton.py"


def test_targets_are_read_as_compute_capabilities() -> None:
    assert target_cc("sm_90a") == (9, 0)
    assert target_cc("sm_120") == (12, 0)
    assert target_cc("8.6") == (8, 6)


def test_listings_name_the_learners_file_without_its_private_folder() -> None:
    assert plain('#loc = loc("/tmp/box-1/listings/kplay_src.py":6:0)') == (
        '#loc = loc("kplay_src.py":6:0)'
    )
    assert plain('\t.file\t1 "/tmp/kplay-x/kplay_src_1.py"') == '\t.file\t1 "kplay_src_1.py"'
    assert plain('!1 = !DIFile(filename: "kplay_src.py", directory: "/tmp/box-1")') == (
        '!1 = !DIFile(filename: "kplay_src.py", directory: ".")'
    )
    other = '#loc3 = loc("/site-packages/triton/language/standard.py":40:11)'
    assert plain(other) == other


def test_an_argument_no_image_takes_gives_no_variant() -> None:
    assert launch_variant([object()], None) is None


def test_a_launch_with_an_integer_of_1_is_not_the_one_to_build() -> None:
    from kplay.kernels.artifact import ArgSpec, Variant

    array = ArgSpec(kind="array", dtype="float32", ndim=1)
    one = ArgSpec(kind="scalar", dtype="int64", value=1)
    half = ArgSpec(kind="scalar", dtype="float32", value=1.0)
    assert not plain_variant(Variant(args=(array, one)))
    assert plain_variant(Variant(args=(array, half, one.model_copy(update={"value": 257}))))


@pytest.mark.slow
def test_an_interpreted_run_carries_the_listings_of_a_gpu_build() -> None:
    pytest.importorskip("triton")
    if has_cuda_gpu():
        pytest.skip("on a GPU Triton compiles at launch: the interpreter is not used")
    from kplay.kernels.evaluate import evaluate

    source = SOLUTION.read_text()
    job = RunJob(problem="vector_add", backend="triton", source=source, seed=1)
    result = evaluate(job)
    assert result.state is RunState.done, result.message
    stage = result.compile
    assert stage is not None and "interpreter" in (stage.compiler or "")
    assert set(stage.ir) == {"ttir", "ttgir", "llir"}
    assert stage.ptx and ".entry vector_add" in stage.ptx and "/tmp" not in stage.ptx
    assert stage.sass and "EXIT" in stage.sass
    (res,) = stage.resources
    assert res.arch is not None and res.arch.startswith("sm_90") and res.registers
    # Every listing maps its rows back to the learner's file, at the tl.load line.
    load_line = next(i for i, t in enumerate(source.splitlines(), 1) if "tl.load" in t)
    for kind, text in {**stage.ir, "ptx": stage.ptx}.items():
        assert load_line in line_map(kind, text).source_lines(), kind
    # A check-only run is for a quick verdict: no build for listings nobody reads.
    # (Another source: the same one would reuse the kernel compiled above, listings and all.)
    other = source + "\n# a check-only run\n"
    quick = evaluate(job.model_copy(update={"mode": "check", "job_id": "quick", "source": other}))
    assert quick.state is RunState.done and quick.compile is not None
    assert quick.compile.ir == {} and quick.compile.ptx is None


def test_a_kernel_that_does_not_build_gives_no_listings(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    from kplay.kernels.artifact import Variant

    source = "import triton\n\n\n@triton.jit\ndef k(x):\n    undefined_name(x)\n"
    assert interpreted_listings(source, "k", tmp_path, Variant(args=())) is None
    assert interpreted_listings("x = 1\n", "k", tmp_path, Variant(args=())) is None
