"""What the runner tests share: the stand-in evaluators' module, small limits, a job
and the child's pid as a result reports it (tests/workers/jobfuncs.py puts it first in the
message)."""

from __future__ import annotations

from kplay.kernels.models import RunJob, RunResult
from kplay.workers.limits import MIB, Limits

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
