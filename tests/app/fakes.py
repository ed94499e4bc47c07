"""A stand-in executor and canned results for testing the web layer without child processes."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kplay.kernels.models import (
    CaseCheck,
    CheckStage,
    CompileStage,
    Diagnostic,
    ProgressEvent,
    Resources,
    RooflineStage,
    RunJob,
    RunResult,
    RunState,
    SystemInfo,
    TimingStage,
)
from kplay.workers.executor import Executor, ResultSink, SubmitRefused

Script = Callable[[RunJob], RunResult]


def correct_result(job: RunJob, median_us: float = 100.0) -> RunResult:
    n = 4194304
    flops, nbytes = float(n), 12.0 * n
    seconds = median_us * 1e-6
    return RunResult(
        job_id=job.job_id,
        problem=job.problem,
        backend=job.backend,
        state=RunState.done,
        message="all 7 cases match the reference",
        compile=CompileStage(
            ok=True,
            compiler="fake-cc 1.0",
            duration_ms=12.5,
            resources=[Resources(kernel="vector_add", registers=16, shared_bytes=0, arch="sm_90")],
            ptx=".version 8.0\n.target sm_90\n",
        ),
        check=CheckStage(
            ok=True,
            cases=[
                CaseCheck(name="one element", params={"n": 1}, ok=True),
                CaseCheck(name="one past a block", params={"n": 257}, ok=True),
            ],
        ),
        timing=TimingStage(
            timed=True,
            case="4M elements",
            params={"n": n},
            median_us=median_us,
            q1_us=median_us * 0.98,
            q3_us=median_us * 1.03,
            iqr_us=median_us * 0.05,
            mean_us=median_us * 1.01,
            stderr_us=0.4,
            min_us=median_us * 0.97,
            reps=50,
            timer="perf_counter_ns",
        ),
        roofline=RooflineStage(
            flops=flops,
            bytes=nbytes,
            intensity_flops_per_byte=flops / nbytes,
            achieved_flops_per_s=flops / seconds,
            achieved_bytes_per_s=nbytes / seconds,
            memory_ceiling_bytes_per_s=1.0e12,
            compute_ceiling_flops_per_s=5.0e13,
            compute_ceiling_name="fp32",
            ridge_flops_per_byte=50.0,
            bound="memory",
            attainable_flops_per_s=1.0e12 * flops / nbytes,
            percent_of_roofline=100.0 * (nbytes / seconds) / 1.0e12,
            ceilings_source="calibrated",
            device="Fake Device 9000",
        ),
        system=SystemInfo(kind="cpu", device="Fake Device 9000", libraries={"numba": "0.0"}),
        wall_ms=850.0,
    )


def wrong_result(job: RunJob) -> RunResult:
    return RunResult(
        job_id=job.job_id,
        problem=job.problem,
        backend=job.backend,
        state=RunState.wrong,
        message="1 of 2 cases differ from the reference",
        compile=CompileStage(ok=True),
        check=CheckStage(
            ok=False,
            cases=[
                CaseCheck(name="one element", params={"n": 1}, ok=True),
                CaseCheck(
                    name="one past a block",
                    params={"n": 257},
                    ok=False,
                    mismatches=1,
                    first_mismatch_index=[256],
                    expected=1.5,
                    got=float("nan"),
                    max_abs_err=None,
                ),
            ],
        ),
        system=SystemInfo(kind="cpu", device="Fake Device 9000"),
    )


def compile_error_result(job: RunJob) -> RunResult:
    return RunResult(
        job_id=job.job_id,
        problem=job.problem,
        backend=job.backend,
        state=RunState.compile_error,
        message="the kernel did not compile",
        compile=CompileStage(
            ok=False,
            log="kernel.cu(3): error: expected a ';'",
            diagnostics=[Diagnostic(line=3, severity="error", message="expected a ';'")],
        ),
    )


class FakeExecutor(Executor):
    """Runs `script` for each job: at once, inside submit (default), or when released."""

    def __init__(
        self, script: Script | None = None, hold: bool = False, refuse: str | None = None
    ) -> None:
        self.script: Script = script or correct_result
        self.hold = hold
        self.refuse = refuse
        self.sink: ResultSink | None = None
        self.jobs: list[RunJob] = []
        self.pending: dict[str, RunJob] = {}
        self.started = False
        self.stopped = False
        self._lock = threading.Lock()

    def start(self, sink: ResultSink) -> None:
        self.sink = sink
        self.started = True

    def submit(self, job: RunJob) -> None:
        if self.refuse is not None:
            raise SubmitRefused(self.refuse)
        with self._lock:
            self.jobs.append(job)
            self.pending[job.job_id] = job
        if not self.hold:
            self.release(job.job_id)

    def progress(self, job_id: str, state: RunState, detail: str | None = None) -> None:
        assert self.sink is not None
        self.sink.on_event(ProgressEvent(job_id=job_id, state=state, detail=detail))

    def release(self, job_id: str, result: RunResult | None = None) -> None:
        with self._lock:
            job = self.pending.pop(job_id)
        for state in (RunState.compiling, RunState.checking, RunState.timing):
            self.progress(job_id, state, f"{state.value}…")
        assert self.sink is not None
        self.sink.on_result(result or self.script(job))

    def queue_position(self, job_id: str) -> int | None:
        with self._lock:
            ids = list(self.pending)
        return ids.index(job_id) if job_id in ids else None

    def wait_estimate_s(self, job_id: str) -> float | None:
        position = self.queue_position(job_id)
        return None if position is None else 4.0 * position

    def devices(self) -> list[dict[str, Any]]:
        return [{"name": "Fake Device 9000", "kind": "cpu", "backends": {"numba-cpu": "run"}}]

    def stop(self) -> None:
        self.stopped = True
