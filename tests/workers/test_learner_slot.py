"""The learner boxes of one evaluation child: a fresh one per job that used one, started
ahead except while a host kernel is timed, and none kept alive past its job."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from kplay.kernels.models import RunJob, RunResult, RunState
from kplay.workers.learner import LearnerSlot, times_on_host
from kplay.workers.limits import Limits


def _result(state: RunState = RunState.done, message: str = "Correct.") -> RunResult:
    return RunResult(job_id="j", problem="vector_add", backend="numba-cpu", state=state,
                     message=message)  # fmt: skip


def test_boxes_start_ahead_except_under_a_timed_host_kernel(tmp_path: Path) -> None:
    slot = LearnerSlot(Limits(), tmp_path, None, tmp_path / "out.log")
    ours, theirs = socket.socketpair()
    try:
        slot.wait_ready(120)
        assert slot.hand_over(ours, ahead=True)
        first = slot.current
        assert first is not None and slot.waiting is not None  # the next one is warming
        _, fds, _, _ = socket.recv_fds(theirs, 1, 1)
        assert len(fds) == 1  # the child's end of the box's socket arrived
        os.close(fds[0])
        slot.after_job(_result(), used=True)
        assert slot.current is None and not first.alive()  # a used box is gone
        assert slot.hand_over(ours, ahead=False)
        assert slot.waiting is None  # nothing starts beside a timed host kernel
        slot.after_job(_result(), used=False)
        assert slot.current is not None and slot.waiting is None
        assert not slot.hand_over(ours, ahead=True)  # an untouched box serves the next job
        slot.after_job(_result(), used=True)
        assert slot.current is None and slot.waiting is not None
    finally:
        slot.end()
        ours.close()
        theirs.close()
    assert slot.current is None and slot.waiting is None


def test_only_full_numba_cpu_runs_time_on_the_host() -> None:
    job = RunJob(problem="vector_add", backend="numba-cpu", source="x")
    assert times_on_host(job)
    assert not times_on_host(job.model_copy(update={"mode": "check"}))
    assert not times_on_host(job.model_copy(update={"backend": "cuda"}))
