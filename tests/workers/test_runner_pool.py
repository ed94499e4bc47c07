"""The child-process runner's pools: children side by side, waiting callers, lazy start,
recycling, closing, spare children; then real numba-cpu (and, on a GPU host, CUDA) kernels
through kernels.evaluate, crashing and timing out in their children.

Single-job behaviour (output, crashes, limits, environment) is in test_runner_limits.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kplay.kernels.models import RunJob, RunResult, RunState
from kplay.workers.limits import Limits
from kplay.workers.runner import PoolClosed, WorkerPool
from tests.workers.runner_support import FUNCS, SMALL, job, pid_of

# ---------------------------------------------------------------- pools


def test_two_jobs_run_at_once_with_size_two(tmp_path: Path) -> None:
    # Each job waits until the other has started; that only works if both run at once.
    sources = [f"rendezvous:{tmp_path}:{name}" for name in ("a", "b")]
    results: list[RunResult] = []
    with WorkerPool(2, SMALL, target=f"{FUNCS}:ok") as p:
        threads = [
            threading.Thread(target=lambda s=s: results.append(p.run(job(s)))) for s in sources
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert [r.state for r in results] == [RunState.done, RunState.done], results
    assert len({r.message for r in results}) == 2  # two different processes


def test_more_callers_than_children_wait_their_turn() -> None:
    results: list[RunResult] = []
    lock = threading.Lock()

    def call() -> None:
        result = p.run(job("sleep"))
        with lock:
            results.append(result)

    with WorkerPool(1, SMALL, target=f"{FUNCS}:ok") as p:
        threads = [threading.Thread(target=call) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert [r.state for r in results] == [RunState.done] * 3
    assert len({r.message for r in results}) == 1  # the same child served them in turn


def test_lazy_pool_starts_children_on_demand_without_warm_up() -> None:
    with WorkerPool(1, SMALL, target=f"{FUNCS}:ok", warm=False) as p:
        assert not p.wait_ready(0.2)
        result = p.run(job())
    assert result.state is RunState.done
    assert "warmed=False" in (result.message or "")


def test_jobs_per_child_recycles_children() -> None:
    limits = SMALL.model_copy(update={"jobs_per_child": 1})
    with WorkerPool(1, limits, target=f"{FUNCS}:ok") as p:
        pids = {pid_of(p.run(job())) for _ in range(3)}
    assert len(pids) == 3


def test_closed_pool_refuses_jobs() -> None:
    p = WorkerPool(1, SMALL, target=f"{FUNCS}:ok", warm=False)
    p.close()
    with pytest.raises(PoolClosed):
        p.run(job())


def test_close_ends_a_running_job_with_a_result() -> None:
    p = WorkerPool(1, SMALL, target=f"{FUNCS}:ok")
    started = threading.Event()
    results: list[RunResult] = []
    thread = threading.Thread(
        target=lambda: results.append(p.run(job("announce-hang"), lambda e: started.set()))
    )
    thread.start()
    assert started.wait(30)
    p.close()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert results[0].state is RunState.runtime_error
    assert results[0].message == "the worker pool was shut down during the job, while compiling"
    assert results[0].phase is RunState.compiling


# ---------------------------------------------------------------- spares


def test_a_spare_child_takes_over_at_once_when_one_retires(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every warm-up takes 3 s; each child serves one job. Without the spare the second
    # job would wait for a replacement's warm-up.
    monkeypatch.setenv("KPLAY_ENGINE_TEST_WARMUP_S", "3")
    limits = SMALL.model_copy(update={"jobs_per_child": 1})
    with WorkerPool(1, limits, target=f"{FUNCS}:ok", spares=1) as p:
        assert p.wait_ready(60), "the pool and its spare did not warm up"
        first = p.run(job())
        start = time.monotonic()
        second = p.run(job())
        waited = time.monotonic() - start
        assert first.state is RunState.done and second.state is RunState.done
        assert pid_of(first) != pid_of(second)
        assert waited < 2.0, f"the second job waited {waited:.1f} s for a child"


def test_idle_children_are_reused_most_recent_first() -> None:
    # With a spare idle beside it, consecutive jobs still go to the same warm child.
    with WorkerPool(1, SMALL, target=f"{FUNCS}:ok", spares=1) as p:
        assert p.wait_ready(60)
        pids = {pid_of(p.run(job())) for _ in range(4)}
        assert len(pids) == 1
        assert len(p.pids()) == 2  # the spare is alive and idle


def test_negative_spares_are_refused() -> None:
    with pytest.raises(ValueError, match="spares"):
        WorkerPool(1, SMALL, target=f"{FUNCS}:ok", spares=-1)


# ---------------------------------------------------------------- through kernels.evaluate

CORRECT = """\
import numba


@numba.njit
def vector_add(a, b, out, n):
    for i in range(n):
        out[i] = a[i] + b[i]
"""

ENDLESS = """\
import numba


@numba.njit
def vector_add(a, b, out, n):
    i = 0
    while True:
        out[i % n] = a[i % n] + b[i % n]
        i += 1
"""

SEGFAULT = """\
import ctypes

import numba


@numba.njit
def vector_add(a, b, out, n):
    for i in range(n):
        out[i] = a[i] + b[i]


ctypes.string_at(0)
"""


@pytest.fixture(scope="module")
def engine() -> Iterator[WorkerPool]:
    pytest.importorskip("kplay.kernels.evaluate")
    limits = Limits(wall_timeout_s=5.0, output_tail_bytes=4096, start_timeout_s=120.0)
    with WorkerPool(1, limits) as p:
        yield p


def engine_job(source: str) -> RunJob:
    return RunJob(problem="vector_add", backend="numba-cpu", source=source, mode="check")


def test_engine_checks_a_correct_numba_cpu_kernel(engine: WorkerPool) -> None:
    states: list[RunState] = []
    result = engine.run(engine_job(CORRECT), on_event=lambda e: states.append(e.state))
    assert result.state is RunState.done, result.message
    assert result.check is not None and result.check.ok
    assert states[0] is RunState.compiling and RunState.checking in states


def test_engine_endless_njit_loop_times_out_and_the_next_job_passes(engine: WorkerPool) -> None:
    result = engine.run(engine_job(ENDLESS))
    assert result.state is RunState.timeout
    assert (result.message or "").startswith("timed out after 5 s:")
    after = engine.run(engine_job(CORRECT))
    assert after.state is RunState.done, after.message


def test_engine_segfault_in_learner_code_and_the_next_job_passes(engine: WorkerPool) -> None:
    result = engine.run(engine_job(SEGFAULT))
    assert result.state is RunState.runtime_error
    assert result.message == "crashed with signal SIGSEGV (segmentation fault)"
    after = engine.run(engine_job(CORRECT))
    assert after.state is RunState.done, after.message


CUDA_CORRECT = """\
extern "C" __global__ void vector_add(const float* a, const float* b, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
"""

CUDA_ILLEGAL_ADDRESS = """\
extern "C" __global__ void vector_add(const float* a, const float* b, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float* nowhere = (float*)0x8;  // not device memory: the launch fails with an illegal address
    if (i < n) nowhere[i] = a[i] + b[i];
}
"""


@pytest.mark.gpu
def test_engine_illegal_address_replaces_the_child_and_the_next_job_passes(
    engine: WorkerPool,
) -> None:
    first = engine.run(engine_job(CORRECT))  # a CPU job works on a GPU host too
    assert first.state is RunState.done, first.message
    before = engine.pids()
    result = engine.run(engine_job(CUDA_ILLEGAL_ADDRESS).model_copy(update={"backend": "cuda"}))
    assert result.state is RunState.runtime_error, result.message
    assert before and not set(before) & set(engine.pids())  # the poisoned child is gone
    after = engine.run(engine_job(CUDA_CORRECT).model_copy(update={"backend": "cuda"}))
    assert after.state is RunState.done, after.message
