"""The child-process runner: limits, crashes, output capture, events, environment, pools.

Most tests run small stand-ins for the evaluator (tests/workers/jobfuncs.py) so that each
failure is produced on purpose; the last group goes through kernels.evaluate with real
numba-cpu kernels.
"""

from __future__ import annotations

import json
import os
import resource
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kplay.kernels.models import RunJob, RunResult, RunState
from kplay.workers.limits import MIB, Limits, child_env
from kplay.workers.runner import PoolClosed, WorkerPool

FUNCS = "tests.workers.jobfuncs"
SMALL = Limits(
    wall_timeout_s=4.0,
    cpu_seconds=30,
    memory_bytes=384 * MIB,
    output_bytes=256 * 1024,
    output_tail_bytes=2048,
    start_timeout_s=60.0,
)


def job(source: str = "plain", problem: str = "vector_add", backend: str = "numba-cpu") -> RunJob:
    return RunJob(problem=problem, backend=backend, source=source)


def pid_of(result: RunResult) -> str:
    assert result.message is not None
    return result.message.split()[0]


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    """One warm child whose job function does what the job's source names."""
    with WorkerPool(1, SMALL, target=f"{FUNCS}:ok") as p:
        yield p


def assert_passes(pool: WorkerPool) -> RunResult:
    result = pool.run(job())
    assert result.state is RunState.done, result.message
    return result


# ---------------------------------------------------------------- a good job


def test_result_comes_back_with_identity_output_and_wall_time(pool: WorkerPool) -> None:
    j = job()
    result = pool.run(j)
    assert result.state is RunState.done
    assert (result.job_id, result.problem, result.backend) == (j.job_id, j.problem, j.backend)
    assert result.output_tail == f"ok {j.job_id}\n"
    assert result.wall_ms is not None and result.wall_ms >= 0
    assert "warmed=True" in (result.message or "")


def test_output_of_one_job_does_not_leak_into_the_next(pool: WorkerPool) -> None:
    first, second = pool.run(job()), pool.run(job())
    assert first.job_id not in (second.output_tail or "")


# ---------------------------------------------------------------- failures, then recovery


def test_hang_times_out_and_the_next_job_passes(pool: WorkerPool) -> None:
    result = pool.run(job("hang"))
    assert result.state is RunState.timeout
    assert (result.message or "").startswith("timed out after 4 s:")
    assert "about to hang" in (result.output_tail or "")
    assert result.wall_ms is not None and result.wall_ms >= 4000
    assert_passes(pool)


def test_segfault_names_the_signal_and_the_next_job_passes(pool: WorkerPool) -> None:
    before = pid_of(assert_passes(pool))
    result = pool.run(job("segfault"))
    assert result.state is RunState.runtime_error
    assert result.message == "crashed with signal SIGSEGV (segmentation fault)"
    # faulthandler leaves the Python side of the crash in the output.
    assert "Segmentation fault" in (result.output_tail or "")
    after = pid_of(assert_passes(pool))
    assert after != before


def test_exit_without_result_is_reported(pool: WorkerPool) -> None:
    result = pool.run(job("exit"))
    assert result.state is RunState.runtime_error
    assert "exited with status 3" in (result.message or "")
    assert_passes(pool)


def test_poisoned_context_retires_the_child_after_its_result(pool: WorkerPool) -> None:
    result = pool.run(job("poison"))
    assert result.state is RunState.runtime_error
    assert result.message is not None
    poisoned_pid = result.message.rsplit(" ", 1)[1]
    after = assert_passes(pool)
    assert pid_of(after) != f"pid={poisoned_pid}"


def test_evaluator_exception_becomes_runtime_error() -> None:
    with WorkerPool(1, SMALL, target=f"{FUNCS}:raises", warm=False) as p:
        result = p.run(job())
    assert result.state is RunState.runtime_error
    assert result.message == "the evaluation failed: RuntimeError: engine bug"
    assert "Traceback" in (result.output_tail or "")


def test_missing_evaluator_is_reported_on_every_job() -> None:
    with WorkerPool(1, SMALL, target="tests.workers.no_such_module:evaluate") as p:
        results = [p.run(job()) for _ in range(2)]
    for result in results:
        assert result.state is RunState.runtime_error
        assert "could not load its evaluator" in (result.message or "")


# ---------------------------------------------------------------- limits


def test_stdout_flood_is_stopped_and_its_tail_capped() -> None:
    with WorkerPool(1, SMALL, target=f"{FUNCS}:flood") as p:
        result = p.run(job())
    assert result.state is RunState.runtime_error
    assert result.message == "printed more than 256 KiB to stdout/stderr and was stopped"
    tail = result.output_tail or ""
    assert tail.startswith("[... ") and "earlier bytes not shown]" in tail
    assert len(tail.split("\n", 1)[1].encode()) <= SMALL.output_tail_bytes


def test_c_level_output_is_captured() -> None:
    with WorkerPool(1, SMALL, target=f"{FUNCS}:c_printf", warm=False) as p:
        result = p.run(job())
    assert result.state is RunState.done
    assert "from C printf 42" in (result.output_tail or "")
    assert "from Python stderr" in (result.output_tail or "")


def test_memory_hog_is_stopped_by_the_resident_memory_watchdog() -> None:
    limits = SMALL.model_copy(update={"address_space_limit": "off"})
    with WorkerPool(1, limits, target=f"{FUNCS}:memory_hog") as p:
        result = p.run(job())
    assert result.state is RunState.runtime_error
    assert result.message == "used more than 384 MiB of host memory"


def test_huge_allocation_is_refused_by_the_address_space_limit() -> None:
    limits = SMALL.model_copy(update={"address_space_limit": "on"})
    with WorkerPool(1, limits, target=f"{FUNCS}:huge_allocation") as p:
        result = p.run(job())
    assert result.state is RunState.runtime_error
    assert result.message == "used more than 384 MiB of host memory"
    assert "MemoryError" in (result.output_tail or "")


def test_cpu_time_limit() -> None:
    limits = SMALL.model_copy(update={"cpu_seconds": 1})
    with WorkerPool(1, limits, target=f"{FUNCS}:burn_cpu") as p:
        result = p.run(job())
    assert result.state is RunState.runtime_error
    assert result.message == "used more than 1 s of CPU time (signal SIGXCPU)"


# ---------------------------------------------------------------- events and environment


def test_progress_events_arrive_in_order_before_the_result() -> None:
    seen: list[str] = []
    j = job()
    with WorkerPool(1, SMALL, target=f"{FUNCS}:progress") as p:
        result = p.run(j, on_event=lambda e: seen.append(f"{e.job_id}:{e.state.value}"))
    assert result.state is RunState.done
    assert seen == [f"{j.job_id}:{s}" for s in ("compiling", "checking", "timing")]


def test_failing_event_listener_does_not_fail_the_job() -> None:
    def listener(event: object) -> None:
        raise RuntimeError("listener bug")

    with WorkerPool(1, SMALL, target=f"{FUNCS}:progress") as p:
        result = p.run(job(), on_event=listener)
    assert result.state is RunState.done


def test_child_sees_a_scrubbed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KPLAY_DATABASE_URL", "postgresql://user:secret@db/kplay")
    monkeypatch.setenv("KPLAY_BROKER_URL", "redis://:secret@broker:6379/0")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("NUMBA_OPT", "2")
    monkeypatch.setenv("NUMBA_CACHE_DIR", "/somewhere/else")
    with WorkerPool(1, SMALL, target=f"{FUNCS}:environment") as p:
        seen = json.loads(p.run(job()).message or "{}")
        cache_dir = p.cache_dir
    env, cwd = seen["env"], Path(seen["cwd"])
    for secret in ("KPLAY_DATABASE_URL", "KPLAY_BROKER_URL", "AWS_SECRET_ACCESS_KEY"):
        assert secret not in env
    assert "secret" not in json.dumps(env)
    assert env["NUMBA_OPT"] == "2"
    assert env["NUMBA_CACHE_DIR"] == str(cache_dir / "numba")
    assert env["TRITON_CACHE_DIR"] == str(cache_dir / "triton")
    home = Path(env["HOME"])
    assert home.name.startswith("kplay-child-")
    # Each job works in a fresh directory inside the child's private one.
    assert cwd.parent == home and Path(env["TMPDIR"]) == cwd
    assert not home.exists()  # removed when the pool closed


def test_child_env_is_an_allow_list(tmp_path: Path) -> None:
    parent = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "KPLAY_FORCE_NO_GPU": "1",
        "KPLAY_SECRET_KEY": "x",
        "REDIS_URL": "redis://x",
        "TRITON_INTERPRET": "1",
        "PYTHONPATH": "/extra",
        "SSH_AUTH_SOCK": "/tmp/agent",
    }
    limits = Limits(pass_env=["SSH_AUTH_SOCK"], set_env={"KPLAY_ENGINE_MODE": "test"})
    env = child_env(limits, tmp_path / "home", tmp_path / "cache", parent)
    assert env["HOME"] == env["TMPDIR"] == str(tmp_path / "home")
    assert env["KPLAY_FORCE_NO_GPU"] == "1" and env["TRITON_INTERPRET"] == "1"
    assert env["SSH_AUTH_SOCK"] == "/tmp/agent" and env["KPLAY_ENGINE_MODE"] == "test"
    assert "KPLAY_SECRET_KEY" not in env and "REDIS_URL" not in env
    # The parent's own PYTHONPATH passes unchanged; nothing is added in front of it.
    assert env["PYTHONPATH"] == "/extra"


def test_core_dumps_off_and_file_size_capped() -> None:
    with WorkerPool(1, SMALL, target=f"{FUNCS}:rlimits", warm=False) as p:
        soft = json.loads(p.run(job()).message or "{}")
    assert soft["core"] == 0
    assert soft["fsize"] == SMALL.file_bytes


@pytest.mark.gpu
def test_no_address_space_limit_where_cuda_needs_the_room() -> None:
    parent_soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    with WorkerPool(1, SMALL, target=f"{FUNCS}:rlimits", warm=False) as p:
        soft = json.loads(p.run(job()).message or "{}")
    assert soft["as"] == parent_soft


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
    assert results[0].message == "the worker pool was shut down while the job ran"


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
