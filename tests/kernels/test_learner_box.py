"""The learner's box: learner code runs there, and the evaluator's verdict stays its own.

These start a plain box process (the worker sandboxes it; tests/workers cover that) and
evaluate through it, as a worker does.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from kplay.kernels.evaluate import evaluate
from kplay.kernels.models import RunJob, RunState
from kplay.kernels.remote import BoxClient, spawn_plain_box
from kplay.kernels.shm import SharedArena

PROBLEMS = Path(__file__).resolve().parents[2] / "kernels" / "problems"
GOOD = (PROBLEMS / "vector_add/solutions/correct/vector_add.numba_cpu.py").read_text()
WRONG = (PROBLEMS / "vector_add/solutions/wrong/accumulates_into_input.numba_cpu.py").read_text()


@pytest.fixture
def box() -> Iterator[BoxClient]:
    client, proc = spawn_plain_box()
    yield client
    client.close()
    proc.wait(timeout=30)


def _job(
    source: str, mode: str = "check", backend: str = "numba-cpu", problem: str = "vector_add"
) -> RunJob:
    return RunJob(
        job_id=uuid.uuid4().hex, problem=problem, backend=backend, source=source, mode=mode
    )


def test_the_learners_top_level_code_runs_in_the_box_not_here(box: BoxClient) -> None:
    marker = f"KPLAY_TEST_MARK_{uuid.uuid4().hex[:8]}"
    source = f"import os\nos.environ[{marker!r}] = str(os.getpid())\n" + GOOD
    result = evaluate(_job(source), box=box)
    assert result.state is RunState.done, result.message
    assert marker not in os.environ  # this process never imported the learner's module
    assert box.used


def test_patching_the_harness_in_the_box_cannot_turn_wrong_into_right(box: BoxClient) -> None:
    # Replaces the checker and the comparison in whatever process imports it.
    patch = (
        "import kplay.kernels.check as _c\n"
        "import numpy as _np\n"
        "_c.run_case = lambda *a, **k: (_ for _ in ()).throw(SystemExit(0))\n"
        "_np.allclose = lambda *a, **k: True\n"
        "_np.array_equal = lambda *a, **k: True\n"
    )
    result = evaluate(_job(patch + WRONG), box=box)
    assert result.state is RunState.wrong, result.message
    assert "inputs are read-only" in (result.message or "")


def test_a_learner_exception_is_reported_with_its_line(box: BoxClient) -> None:
    source = GOOD.replace("out[i] = a[i] + b[i]", "out[i] = a[i] + b[i] + undefined_name")
    assert source != GOOD
    result = evaluate(_job(source), box=box)
    assert result.state in (RunState.compile_error, RunState.runtime_error)
    assert "undefined_name" in (result.message or "") + str(result.compile)


def test_a_box_that_dies_ends_the_job_with_words(box: BoxClient) -> None:
    source = "import os\n" + GOOD + "\nos._exit(3)\n"  # the box exits while loading it
    result = evaluate(_job(source), box=box)
    assert result.state is RunState.runtime_error
    assert "stopped answering" in (result.message or "")


def test_shared_arrays_are_located_and_foreign_ones_refused() -> None:
    arena = SharedArena()
    try:
        x = arena.alloc_copy(np.arange(32, dtype=np.float32).reshape(4, 8))
        where = arena.locate(x[1:, 2:])
        assert where["offset"] == (8 + 2) * 4
        assert where["shape"] == [3, 6] and where["strides"] == [32, 4]
        with pytest.raises(ValueError):
            arena.locate(np.zeros(4, dtype=np.float32))
        assert len(arena.take_unsent()) == 1 and arena.take_unsent() == []
    finally:
        arena.close()


def test_nvrtc_builds_a_cubin_without_a_gpu() -> None:
    pytest.importorskip("cuda.bindings")
    from kplay.kernels.backends.cuda_artifact import nvrtc_cubin

    source = (PROBLEMS / "vector_add/solutions/correct/vector_add.cu").read_text()
    try:
        stage, image, lowered = nvrtc_cubin(source, "vector_add", "sm_90", ("-std=c++17",))
    except RuntimeError as exc:  # no libnvrtc on this machine
        pytest.skip(f"NVRTC is not available: {exc}")
    assert stage.ok and image is not None and image[:4] == b"\x7fELF"
    assert lowered == "vector_add"
    stage, image, _ = nvrtc_cubin(source + "\nint broken = ;\n", "vector_add", "sm_90", ())
    assert not stage.ok and image is None
    assert any(d.line is not None and d.severity == "error" for d in stage.diagnostics)
    stage, _, _ = nvrtc_cubin(source, "vector_sub", "sm_90", ())
    assert not stage.ok and "vector_sub" in stage.diagnostics[0].message


GPU_CASES = [
    ("cuda", "correct/vector_add.cu", RunState.done),
    ("cuda", "wrong/off_by_one.cu", RunState.wrong),
    ("numba-cuda", "correct/vector_add.numba_cuda.py", RunState.done),
    ("numba-cuda", "wrong/grid_rounded_down.numba_cuda.py", RunState.wrong),
    ("triton", "correct/vector_add.triton.py", RunState.done),
    ("triton", "wrong/no_program_offset.triton.py", RunState.wrong),
]


@pytest.mark.gpu
@pytest.mark.parametrize(("backend", "path", "expected"), GPU_CASES)
def test_gpu_kernels_built_in_a_box_without_a_gpu_run_here(
    backend: str, path: str, expected: RunState
) -> None:
    """The box compiles for this device without seeing it; this process loads and runs."""
    source = (PROBLEMS / "vector_add" / "solutions" / path).read_text()
    client, proc = spawn_plain_box()
    try:
        result = evaluate(_job(source, mode="full", backend=backend), box=client)
        assert result.state is expected, result.message
        assert client.used
        if expected is RunState.done:
            assert result.timing is not None and result.timing.timed
            assert result.compile is not None and result.compile.ok
    finally:
        client.close()
        proc.wait(timeout=30)
    if expected is not RunState.done:
        return
    # The same source again, with a fresh box: this process has the kernel loaded, and
    # learner code reaches no box at all.
    client, proc = spawn_plain_box()
    try:
        again = evaluate(_job(source, mode="full", backend=backend), box=client)
        assert again.state is RunState.done, again.message
        assert not client.used
    finally:
        client.close()
        proc.wait(timeout=30)


def test_a_kept_gpu_kernel_gives_a_new_box_its_source_before_a_new_variant() -> None:
    """A warm evaluator's kernel meets a variant its first box never built: the job's own
    box, which has not seen the source, is given it first (here: NVRTC, no GPU needed)."""
    pytest.importorskip("cuda.bindings")
    from kplay.kernels.backends.base import LaunchSpec
    from kplay.kernels.remote import ArtifactKernel

    source = (PROBLEMS / "vector_add/solutions/correct/vector_add.cu").read_text()
    load = {"op": "load", "backend": "cuda", "source": source, "kernel": "vector_add",
            "mode": "export", "target_cc": "9.0"}  # fmt: skip

    class Loaded:
        launches = 0

        def launch(self, args: object, spec: object) -> None:
            Loaded.launches += 1

    class Cuda:  # the evaluator's half, without a device: what it was handed
        key = "cuda"
        images: list[str] = []

        def load(self, artifact: object) -> Loaded:
            Cuda.images.append(artifact.entry)  # type: ignore[attr-defined]
            return Loaded()

    kernel = ArtifactKernel(Cuda(), None, None, load)  # type: ignore[arg-type]
    client, proc = spawn_plain_box()
    try:
        kernel.rebind(client)
        a = np.zeros(4, dtype=np.float32)
        kernel.launch([a, a, a, np.int32(4)], LaunchSpec("vector_add", (1,), (32,)))
        kernel.launch([a, a, a, np.int32(8)], LaunchSpec("vector_add", (1,), (32,)))
    finally:
        client.close()
        proc.wait(timeout=30)
    assert Cuda.images == ["vector_add"]  # built once, in the box that got the source
    assert Loaded.launches == 2


def test_a_wrong_bfloat16_triton_kernel_in_the_box_is_wrong_not_a_crash(box: BoxClient) -> None:
    # bfloat16 arrays cross to the box by name (their NumPy type string is a bare "<V2") and
    # reach the learner's Triton kernel as torch bfloat16 tensors; a bool case parameter
    # reaches the interpreter as an int.
    wrong = PROBLEMS / "attention_fwd/solutions/wrong/missing_rescale.triton.py"
    job = _job(wrong.read_text(), backend="triton", problem="attention_fwd")
    result = evaluate(job, box=box)
    assert result.state is RunState.wrong, result.message
    arena = SharedArena()
    try:
        halves = arena.alloc_copy(np.arange(15, dtype=np.float32).astype(ml_dtypes.bfloat16))
        where = arena.locate(halves)
        assert where["dtype"] == "bfloat16"
    finally:
        arena.close()
