"""LocalExecutor: FIFO dispatch onto the child-process pool, results and events to a sink."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kplay.kernels.models import ProgressEvent, RunJob, RunResult, RunState
from kplay.workers.executor import SubmitRefused
from kplay.workers.limits import MIB, Limits
from kplay.workers.local import LocalExecutor

OK = "tests.workers.jobfuncs:ok"
LIMITS = Limits(wall_timeout_s=4.0, memory_bytes=512 * MIB, start_timeout_s=60.0)


class Sink:
    """Collects what the executor delivers; lets a test wait for results."""

    def __init__(self, fail_events: bool = False) -> None:
        self.events: list[ProgressEvent] = []
        self.results: dict[str, RunResult] = {}
        self.order: list[str] = []
        self.fail_events = fail_events
        self._cond = threading.Condition()

    def on_event(self, event: ProgressEvent) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()
        if self.fail_events:
            raise RuntimeError("sink bug")

    def on_result(self, result: RunResult) -> None:
        with self._cond:
            self.results[result.job_id] = result
            self.order.append(result.job_id)
            self._cond.notify_all()

    def wait_results(self, n: int, timeout_s: float = 60.0) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.results) >= n, timeout_s), self.results

    def wait_event(self, job_id: str, timeout_s: float = 60.0) -> None:
        with self._cond:
            found = self._cond.wait_for(
                lambda: any(e.job_id == job_id for e in self.events), timeout_s
            )
            assert found, f"no event for {job_id}"


def job(source: str = "plain") -> RunJob:
    return RunJob(problem="vector_add", backend="numba-cpu", source=source)


@pytest.fixture
def started() -> Iterator[tuple[LocalExecutor, Sink]]:
    executor = LocalExecutor(1, LIMITS, target=OK)
    sink = Sink()
    executor.start(sink)
    yield executor, sink
    executor.stop()


def test_results_reach_the_sink_in_submission_order(started: tuple[LocalExecutor, Sink]) -> None:
    executor, sink = started
    jobs = [job(), job("segfault"), job()]
    for j in jobs:
        executor.submit(j)
    sink.wait_results(3)
    assert sink.order == [j.job_id for j in jobs]
    states = [sink.results[j.job_id].state for j in jobs]
    assert states == [RunState.done, RunState.runtime_error, RunState.done]


def test_queue_positions(started: tuple[LocalExecutor, Sink], tmp_path: Path) -> None:
    executor, sink = started
    gate = tmp_path / "open"
    first, second, third = job(f"gate:{gate}"), job(), job()
    executor.submit(first)
    sink.wait_event(first.job_id)  # the child has it: it is running
    executor.submit(second)
    executor.submit(third)
    assert executor.queue_position(first.job_id) == 0
    assert executor.queue_position(second.job_id) == 1
    assert executor.queue_position(third.job_id) == 2
    assert executor.queue_position("no-such-job") is None
    gate.touch()
    sink.wait_results(3)
    assert all(executor.queue_position(j.job_id) is None for j in (first, second, third))
    assert sink.results[first.job_id].state is RunState.done


def test_progress_events_reach_the_sink() -> None:
    executor = LocalExecutor(1, LIMITS, target="tests.workers.jobfuncs:progress")
    sink = Sink()
    executor.start(sink)
    try:
        j = job()
        executor.submit(j)
        sink.wait_results(1)
    finally:
        executor.stop()
    assert [e.state for e in sink.events if e.job_id == j.job_id] == [
        RunState.compiling,
        RunState.checking,
        RunState.timing,
    ]


def test_failing_sink_events_do_not_lose_the_result() -> None:
    executor = LocalExecutor(1, LIMITS, target="tests.workers.jobfuncs:progress")
    sink = Sink(fail_events=True)
    executor.start(sink)
    try:
        j = job()
        executor.submit(j)
        sink.wait_results(1)
    finally:
        executor.stop()
    assert sink.results[j.job_id].state is RunState.done


def test_an_exception_inside_the_executor_still_ends_the_run(
    started: tuple[LocalExecutor, Sink], monkeypatch: pytest.MonkeyPatch
) -> None:
    executor, sink = started

    def broken(*args: object, **kwargs: object) -> RunResult:
        raise RuntimeError("pool bug")

    assert executor._pool is not None
    monkeypatch.setattr(executor._pool, "run", broken)
    j = job()
    executor.submit(j)
    sink.wait_results(1)
    result = sink.results[j.job_id]
    assert result.state is RunState.runtime_error
    assert result.message == "internal error in the executor: pool bug"
    assert (result.job_id, result.problem, result.backend) == (j.job_id, j.problem, j.backend)


def test_two_workers_run_jobs_side_by_side(tmp_path: Path) -> None:
    executor = LocalExecutor(2, LIMITS, target=OK)
    sink = Sink()
    executor.start(sink)
    try:
        jobs = [job(f"rendezvous:{tmp_path}:{name}") for name in ("a", "b")]
        for j in jobs:
            executor.submit(j)
        sink.wait_results(2)
    finally:
        executor.stop()
    assert [sink.results[j.job_id].state for j in jobs] == [RunState.done, RunState.done]


def test_stop_ends_queued_jobs_and_refuses_new_ones(tmp_path: Path) -> None:
    executor = LocalExecutor(1, LIMITS, target=OK)
    sink = Sink()
    executor.start(sink)
    running, queued = job(f"gate:{tmp_path / 'never'}"), job()
    executor.submit(running)
    sink.wait_event(running.job_id)
    executor.submit(queued)
    executor.stop()
    sink.wait_results(2)
    assert sink.results[queued.job_id].message == "the server stopped before this run started"
    assert sink.results[running.job_id].state is RunState.runtime_error
    with pytest.raises(SubmitRefused):
        executor.submit(job())


def test_full_queue_refuses_with_a_clear_message(tmp_path: Path) -> None:
    executor = LocalExecutor(1, LIMITS, target=OK, max_queued=1)
    sink = Sink()
    executor.start(sink)
    try:
        gate = tmp_path / "open"
        running = job(f"gate:{gate}")
        executor.submit(running)
        sink.wait_event(running.job_id)
        executor.submit(job())
        with pytest.raises(SubmitRefused, match="already waiting"):
            executor.submit(job())
        gate.touch()
        sink.wait_results(2)
    finally:
        executor.stop()


def test_submit_before_start_is_refused() -> None:
    with pytest.raises(SubmitRefused):
        LocalExecutor(1, LIMITS, target=OK).submit(job())


def test_devices_describe_this_machine(started: tuple[LocalExecutor, Sink]) -> None:
    executor, sink = started
    j = job()
    executor.submit(j)
    sink.wait_results(1)  # by now a child has started and described the machine
    (device,) = executor.devices()
    assert device["executor"] == "local" and device["workers"] == 1
    assert device["kind"] in ("gpu", "cpu") and device["name"]
    assert device["backends"]["numba-cpu"] == "run"
    assert set(device["backends"]) >= {"numba-cpu", "cuda"}
    assert device["backends"]["cuda"] in ("run", "compile-only", "unavailable")
    # Whether the children are sandboxed, for the app's "trusted local mode" note.
    assert device["sandbox"]["mode"] == executor.sandbox.mode
    assert device["sandbox"]["active"] is executor.sandbox.active


def test_devices_before_any_child_reports() -> None:
    (device,) = LocalExecutor(2, LIMITS, target=OK).devices()
    assert device["workers"] == 2
    assert device["name"]
    assert set(device["backends"].values()) <= {"unknown"}
