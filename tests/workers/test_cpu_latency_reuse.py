"""What makes a cached numba-cpu re-run fast, and what it must not give away.

A learner's box is kept for that learner's next run of the same source (workers/learner),
and the evaluator's shared-memory segments are recycled from job to job (kernels/shm).
These check both: the reuse happens where it may, never for another learner or another
source or after a failed run, and a recycled segment carries nothing of an earlier job
to a new box. The pool runs its boxes in the worker's sandbox where the host has one.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from kplay.kernels.models import RunJob, RunResult, RunState
from kplay.kernels.shm import SharedArena
from kplay.workers.learner import LearnerSlot, reuse_key
from kplay.workers.limits import Limits
from kplay.workers.runner import WorkerPool

KERNEL = """\
import numba


@numba.njit
def vector_add(a, b, out, n):
    for i in range(n):
        out[i] = a[i] + b[i]
"""
# Top-level code runs when a box loads the source: its line in the output says so.
LOADED = 'print("source loaded in a box", flush=True)\n'
# Left in the box's environment by one learner's code; another learner's code looks for it.
LEAVES_A_MARK = 'import os\nos.environ["LEFT_BY_THE_FIRST_LEARNER"] = "yes"\n' + LOADED + KERNEL
LOOKS_FOR_IT = (
    "import os\n"
    'if "LEFT_BY_THE_FIRST_LEARNER" in os.environ:\n'
    '    raise RuntimeError("this box ran another learner\'s code")\n' + LOADED + KERNEL
)
RAISES = LOADED + KERNEL.replace("out[i] = a[i] + b[i]", "raise ValueError('no')")
# Leaves a process behind in its box: a kept box must not keep it.
FORKS = "import os, time\nif os.fork() == 0:\n    time.sleep(600)\n    os._exit(0)\n" + KERNEL


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    pytest.importorskip("kplay.kernels.evaluate")
    limits = Limits(wall_timeout_s=60.0, output_tail_bytes=4096, start_timeout_s=120.0)
    with WorkerPool(1, limits) as p:
        yield p


def _run(pool: WorkerPool, source: str, user: str | None) -> RunResult:
    job = RunJob(problem="vector_add", backend="numba-cpu", source=source, mode="check", user=user)
    return pool.run(job)


def _current_box(pool: WorkerPool) -> object:
    """The box the pool's one child holds now (the parent's handle on it)."""
    (child,) = list(pool._children)
    assert child.learner is not None
    return child.learner.current


def _loaded(result: RunResult) -> bool:
    return "source loaded in a box" in (result.output_tail or "")


def test_a_rerun_of_the_same_source_by_the_same_learner_keeps_its_box(pool: WorkerPool) -> None:
    user = f"ann-{uuid.uuid4().hex[:6]}"
    first = _run(pool, LOADED + KERNEL, user)
    assert first.state is RunState.done, first.message
    assert _loaded(first)
    box = _current_box(pool)
    second = _run(pool, LOADED + KERNEL, user)
    assert second.state is RunState.done, second.message
    assert second.check is not None and second.check.ok
    assert not _loaded(second)  # the box kept the loaded kernel: nothing was loaded again
    assert _current_box(pool) is box


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    return data[data.rindex(b")") + 2 :].split()[0].decode()


def test_a_kept_box_is_swept_and_stopped_between_runs(pool: WorkerPool) -> None:
    user = f"dee-{uuid.uuid4().hex[:6]}"
    first = _run(pool, FORKS, user)
    assert first.state is RunState.done, first.message
    kept = _current_box(pool)
    box = kept.box  # type: ignore[attr-defined]
    left = [s.pid for s in box.members(fresh=True) if s.pid != box.init_pid]
    states = [_state(pid) for pid in left]
    assert states.count("T") == 1, states  # the box itself, stopped until its next run
    assert set(states) <= {"T", "Z"}  # the forked sleeper is dead (unreaped at most)
    result = _run(pool, FORKS, user)
    assert result.state is RunState.done, result.message
    assert _current_box(pool) is kept


def test_another_learner_gets_a_fresh_box_and_the_kept_one_ends(pool: WorkerPool) -> None:
    ann, bob = (f"{name}-{uuid.uuid4().hex[:6]}" for name in ("ann", "bob"))
    assert _run(pool, LEAVES_A_MARK, ann).state is RunState.done
    kept = _current_box(pool)
    assert kept is not None
    # Bob's code would see Ann's mark in her box; the same source, so only the learner differs.
    result = _run(pool, LOOKS_FOR_IT, bob)
    assert result.state is RunState.done, result.message
    assert _loaded(result)
    assert not kept.alive()  # type: ignore[attr-defined] - Ann's box is gone with its process
    # Bob running Ann's source gets a fresh box too: the box is kept for a learner, not a source.
    again = _run(pool, LEAVES_A_MARK, bob)
    assert again.state is RunState.done and _loaded(again)


def test_an_edited_source_or_a_failed_run_gets_a_fresh_box(pool: WorkerPool) -> None:
    user = f"cy-{uuid.uuid4().hex[:6]}"
    assert _run(pool, LOADED + KERNEL, user).state is RunState.done
    edited = LOADED + KERNEL.replace("a[i] + b[i]", "b[i] + a[i]")
    result = _run(pool, edited, user)
    assert result.state is RunState.done and _loaded(result)
    failed = _run(pool, RAISES, user)
    assert failed.state is RunState.runtime_error, failed.message
    again = _run(pool, RAISES, user)
    assert again.state is RunState.runtime_error and _loaded(again)


def test_a_run_without_a_learner_never_keeps_a_box(pool: WorkerPool) -> None:
    assert _run(pool, LOADED + KERNEL, None).state is RunState.done
    result = _run(pool, LOADED + KERNEL, None)
    assert result.state is RunState.done and _loaded(result)


def test_the_reuse_key_names_learner_backend_and_source() -> None:
    job = RunJob(problem="vector_add", backend="numba-cpu", source=KERNEL, user="ann")
    key = reuse_key(job)
    assert key is not None and key[:2] == ("ann", "numba-cpu")
    assert reuse_key(job.model_copy(update={"source": KERNEL + "\n"})) != key
    assert reuse_key(job.model_copy(update={"user": "bob"})) != key
    assert reuse_key(job.model_copy(update={"user": None})) is None
    assert reuse_key(job.model_copy(update={"mode": "profile"})) is None


def test_a_box_past_its_cpu_share_is_not_kept(tmp_path: Path) -> None:
    # One CPU second of budget: the box's own imports spend more than its share of it.
    slot = LearnerSlot(Limits(cpu_seconds=1), tmp_path, None, tmp_path / "out.log")
    ours, theirs = socket.socketpair()
    job = RunJob(problem="vector_add", backend="numba-cpu", source=KERNEL, user="ann")
    done = RunResult(job_id=job.job_id, problem="vector_add", backend="numba-cpu",
                     state=RunState.done)  # fmt: skip
    try:
        slot.wait_ready(120, job)
        assert slot.hand_over(ours, ahead=False, job=job)
        first = slot.current
        assert first is not None
        slot.after_job(done, used=True, job=job, kept=True)
        assert slot.current is None and not first.alive()
    finally:
        slot.end()
        ours.close()
        theirs.close()


# ---------------------------------------------------------------- recycled segments


def test_a_recycled_segment_is_rewritten_in_full_and_not_handed_out_unused() -> None:
    arena = SharedArena()
    try:
        first = arena.alloc_full((1000,), np.dtype(np.float32), 7.0)
        kept = arena.alloc_full((10,), np.dtype(np.int32), 3)
        assert len(arena.take_unsent()) == 2
        arena.recycle()
        with pytest.raises(ValueError):
            arena.locate(first)  # an array of an earlier job cannot be named any more
        arena.new_box()
        # 999 floats round up to the same page: the segment comes back, its tail zeroed.
        again = arena.alloc_copy(np.arange(999, dtype=np.float32))
        assert arena.reused == 1
        assert again.ctypes.data == first.ctypes.data
        assert float(first[999]) == 0.0  # the element past the new array: no 7.0 is left
        # Only this job's segment goes to the new box, not the other one nobody took.
        (sent,) = arena.take_unsent()
        assert arena.locate(again)["seg"] == sent[0]
        with pytest.raises(ValueError):
            arena.locate(kept)
    finally:
        arena.close()


def test_segments_past_the_recycling_budget_are_closed_and_dropped_by_the_box(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kplay.kernels import shm

    monkeypatch.setattr(shm, "RECYCLE_BYTES", 2 * 4096)
    arena = SharedArena()
    try:
        for size in (1, 2, 3):
            arena.alloc_full((size * 1024,), np.dtype(np.float32), 0.0)
        sent = [ident for ident, _, _ in arena.take_unsent()]
        arena.recycle()
        dropped = arena.take_dropped()
        assert dropped and set(dropped) <= set(sent)
        assert arena.take_dropped() == []
    finally:
        arena.close()


# ---------------------------------------------------------------- the reference's sum


def test_vector_adds_float32_reference_is_the_float64_sum_rounded_bit_for_bit() -> None:
    from kplay.kernels.catalog import get_problem

    reference = get_problem("vector_add").reference.reference
    rng = np.random.default_rng(14)
    n = 1 << 20
    # Magnitudes far apart (a sum that a float64 must round too), ties and signed zeros.
    a = (rng.standard_normal(n) * np.exp2(rng.integers(-140, 120, n))).astype(np.float32)
    b = (rng.standard_normal(n) * np.exp2(rng.integers(-140, 120, n))).astype(np.float32)
    a[:4] = [1.0, -0.0, 3.4028235e38, 1.0]
    b[:4] = [np.float32(2.0**-24), 0.0, 3.4028235e38, np.float32(2.0**-24 + 2.0**-47)]
    with np.errstate(over="ignore"):  # the largest float32 twice: inf either way
        got = reference({"a": a, "b": b}, {"n": n})["out"]
        wide = np.add(a, b, dtype=np.float64).astype(np.float32)
    assert got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), wide.view(np.uint32))
