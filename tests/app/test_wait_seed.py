"""The embedded executor's wait estimates start from the runs stored before a restart."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from kplay.app.db.migrate import upgrade
from kplay.app.db.models import Run, utcnow
from kplay.app.db.session import Database
from kplay.app.executors import make_executor, seed_durations
from kplay.config import Settings
from kplay.workers.local import LocalExecutor
from kplay.workers.waits import Durations


def _run(n: int, problem: str, state: str, seconds: float | None) -> Run:
    finished = utcnow() - timedelta(minutes=10 - n)
    return Run(
        id=f"{n:032x}",
        user="anonymous-x",
        problem=problem,
        backend="numba-cpu",
        source="x",
        state=state,
        started_at=None if seconds is None else finished - timedelta(seconds=seconds),
        finished_at=finished,
    )


def test_a_restarted_server_estimates_from_the_stored_runs(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings()
    db = Database(settings.database_url)
    upgrade(db.engine)
    with db.session() as s:
        s.add_all(
            [
                _run(1, "vector_add", "done", 2.0),
                _run(2, "vector_add", "timeout", 30.0),
                _run(3, "sgemm", "wrong", 5.0),
                _run(4, "vector_add", "rejected", 0.0),  # never evaluated
                _run(5, "vector_add", "queued", None),
            ]
        )
    db.dispose()

    executor = make_executor(settings)
    assert isinstance(executor, LocalExecutor)
    # Oldest first, like the durations the executor records itself.
    assert executor.durations.samples(("sgemm", "numba-cpu")) == [2.0, 30.0, 5.0]

    fresh = Durations()
    assert seed_durations(fresh, settings.database_url, limit=1) == 1
    assert fresh.samples(("sgemm", "numba-cpu")) == [5.0]


def test_a_database_without_runs_leaves_the_estimates_empty() -> None:
    durations = Durations()
    assert seed_durations(durations, "sqlite://") == 0
    assert durations.samples(("vector_add", "numba-cpu")) == []
