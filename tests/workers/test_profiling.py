"""Profile jobs on the worker: one profile at a time per GPU, a clear refusal where there is
no Nsight Compute, the queue profiles travel on, and (on a GPU host with ncu) a real
profile of the warptiled SGEMM taken inside the sandbox, naming the learner's lines."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from kplay.kernels.models import RunJob, RunState
from kplay.kernels.ncurun import find_ncu
from kplay.workers.celery_executor import route
from kplay.workers.limits import Limits
from kplay.workers.plan import PROFILE_QUEUE, plan_workers
from kplay.workers.profiling import Profiler, ProfileTimeout, gpu_turn
from kplay.workers.sandbox import prepare
from tests.workers.test_fleet_plan import HOST

ROOT = Path(__file__).parents[2]
WARPTILE = ROOT / "kernels" / "problems" / "sgemm" / "solutions" / "correct" / "gemm_07_warptile.cu"


def test_profiles_on_one_gpu_take_turns(tmp_path: Path) -> None:
    held = threading.Event()
    release = threading.Event()

    def first() -> None:
        with gpu_turn(tmp_path, 10):
            held.set()
            release.wait(5)

    thread = threading.Thread(target=first)
    thread.start()
    assert held.wait(5)
    with pytest.raises(ProfileTimeout, match="another profile held GPU"):
        with gpu_turn(tmp_path, 0.5):
            pass
    started = time.monotonic()
    threading.Timer(0.4, release.set).start()
    with gpu_turn(tmp_path, 10) as waited:
        assert waited >= 0.3 and time.monotonic() - started >= 0.3
    thread.join()


def test_a_host_without_nsight_compute_refuses_in_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("kplay.workers.profiling.find_ncu", lambda: None)
    job = RunJob(problem="sgemm", backend="cuda", source="x", mode="profile")
    result = Profiler(None, Limits(), 30, tmp_path).run(job)
    assert result.state is RunState.rejected
    assert "Nsight Compute (ncu) is not installed" in (result.message or "")
    assert result.profile is None and not result.verified


def test_profiles_travel_on_their_own_queue_which_only_hosts_with_ncu_serve() -> None:
    job = RunJob(problem="sgemm", backend="cuda", source="x", mode="profile")
    assert route(job) == PROFILE_QUEUE
    assert route(job.model_copy(update={"mode": "full"})) == "gpu.any"
    hopper = job.model_copy(update={"requires": "sm90"})  # an arch=sm_90a cell's profile
    assert route(hopper) == f"{PROFILE_QUEUE}.sm90"
    for has_ncu in (True, False):
        host = HOST.model_copy(update={"profiler": has_ncu})
        queues = [q for spec in plan_workers(host) for q in spec.queues]
        assert (PROFILE_QUEUE in queues) is has_ncu
        assert (f"{PROFILE_QUEUE}.sm90" in queues) is has_ncu  # HOST's GPU is a 9.0


@pytest.mark.gpu
@pytest.mark.skipif(find_ncu() is None, reason="needs Nsight Compute (ncu)")
def test_a_real_profile_in_the_sandbox_names_the_learners_lines(tmp_path: Path) -> None:
    sandbox, status = prepare()
    source = WARPTILE.read_text()
    job = RunJob(problem="sgemm", backend="cuda", source=source, mode="profile")
    started = time.monotonic()
    result = Profiler(sandbox, Limits(wall_timeout_s=120), 300, tmp_path).run(job)
    took = time.monotonic() - started
    assert result.state is RunState.done, result.message
    profile = result.profile
    assert profile is not None and profile.kernel
    assert profile.speed_of_light and profile.stalls and profile.report_bytes
    assert profile.lines, "the stall table names none of the learner's lines"
    code = source.splitlines()
    assert all(code[line.line - 1].strip() == line.code for line in profile.lines)
    assert result.timing is None and not result.verified
    print(f"profile in {'sandbox' if status.active else 'plain process'}: {took:.1f} s")
