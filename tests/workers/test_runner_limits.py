"""The child-process runner, one job in one child: results and output capture, crashes and
recovery, limits, progress events, the child's environment and rlimits.

The tests run small stand-ins for the evaluator (tests/workers/jobfuncs.py) so that each
failure is produced on purpose. Pools, spares and the real engine are in test_runner_pool.py.
"""

from __future__ import annotations

import json
import resource
from collections.abc import Iterator
from pathlib import Path

import pytest

from kplay.kernels.models import RunResult, RunState
from kplay.workers import sandbox_view
from kplay.workers.limits import Limits, child_env
from kplay.workers.runner import WorkerPool
from tests.workers.runner_support import FUNCS, SMALL, job, pid_of


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


def test_a_timeout_names_the_phase_it_hit(pool: WorkerPool) -> None:
    """A hang in the check is a timeout in the check, not a failed compile."""
    result = pool.run(job("hang-checking"))
    assert result.state is RunState.timeout
    assert result.phase is RunState.checking
    assert (result.message or "").startswith("timed out after 4 s:")
    assert (result.message or "").endswith(", while checking the test cases")
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
    # Wall time to spare: on a busy machine a second of CPU can take longer than SMALL's 4 s.
    limits = SMALL.model_copy(update={"cpu_seconds": 1, "wall_timeout_s": 60.0})
    with WorkerPool(1, limits, target=f"{FUNCS}:burn_cpu") as p:
        result = p.run(job())
    # A limit is a timeout, named as a limit, never a crash.
    assert result.state is RunState.timeout
    # The parent's measure of the job's CPU time, or the child's own RLIMIT_CPU: whichever
    # comes first.
    assert result.message in (
        "timed out: used its 1 s of CPU time (the limit on CPU time)",
        "timed out: used its 1 s of CPU time (the limit on CPU time) (signal SIGXCPU)",
    )


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
        # A sandboxed child keeps its home and its caches in its own private /tmp.
        sandboxed = p.sandbox.active
        cache_dir = sandbox_view.CACHE if sandboxed else p.cache_dir
    env, cwd = seen["env"], Path(seen["cwd"])
    for secret in ("KPLAY_DATABASE_URL", "KPLAY_BROKER_URL", "AWS_SECRET_ACCESS_KEY"):
        assert secret not in env
    assert "secret" not in json.dumps(env)
    assert env["NUMBA_OPT"] == "2"
    assert env["NUMBA_CACHE_DIR"] == str(cache_dir / "numba")
    assert env["TRITON_CACHE_DIR"] == str(cache_dir / "triton")
    home = Path(env["HOME"])
    if sandboxed:
        assert home == sandbox_view.HOME
        assert env["KPLAY_CACHE_DIR"] == str(sandbox_view.ENGINE_CACHE)
    else:
        assert home.name.startswith("kplay-child-")
        assert not home.exists()  # removed when the pool closed
    # Each job works in a fresh directory inside the child's private one.
    assert cwd.parent == home and Path(env["TMPDIR"]) == cwd


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
