"""The executor interface the web app talks to.

Two implementations share it: `LocalExecutor` (in-process threads feeding the
child-process pool, the embedded default) and `CeleryExecutor` (jobs on Redis, results
consumed back by the web side). The app never needs to know which one it holds.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Protocol

from kplay.kernels.models import ProgressEvent, RunJob, RunResult


class ResultSink(Protocol):
    """Where an executor delivers what happens to a job. Called from any thread."""

    def on_event(self, event: ProgressEvent) -> None: ...

    def on_result(self, result: RunResult) -> None: ...


class SubmitRefused(Exception):
    """The job cannot be accepted (nothing can serve it, a cap is reached). Message is for users."""


class Executor(ABC):
    @abstractmethod
    def start(self, sink: ResultSink) -> None:
        """Begin delivering events and results to `sink`."""

    @abstractmethod
    def submit(self, job: RunJob) -> None:
        """Hand a job over; returns at once. Raises SubmitRefused with a clear message."""

    @abstractmethod
    def queue_position(self, job_id: str) -> int | None:
        """0 when running, n when n jobs are ahead, None when unknown or finished."""

    @abstractmethod
    def devices(self) -> list[dict[str, Any]]:
        """What can run jobs: one dict per device/worker (name, kind, capability, queue...)."""

    def wait_estimate_s(self, job_id: str) -> float | None:
        """Seconds until the job is expected to start; 0 when running; None when unknown."""
        return None

    @abstractmethod
    def stop(self) -> None:
        """Stop accepting jobs and release resources."""
