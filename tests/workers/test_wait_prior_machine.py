"""The wait estimate's prior kept for the machine as well as beside the database: a server
started on a fresh data folder (or on PostgreSQL) still has an earlier server's durations."""

from __future__ import annotations

from pathlib import Path

from kplay.app.executors import make_executor
from kplay.config import Settings
from kplay.workers.local import LocalExecutor, kind_of
from kplay.workers.waits import MIN_SAMPLES, Durations, load, save
from tests.workers.celery_support import job
from tests.workers.test_local_executor import LIMITS, Sink

OK = "tests.workers.jobfuncs:ok"
FULL = ("vector_add", "numba-cpu", "full")


def kept(path: Path, seconds: float, n: int = MIN_SAMPLES) -> None:
    durations = Durations()
    for _ in range(n):
        durations.add(FULL, seconds)
    save(durations, path)


def test_the_embedded_executor_keeps_durations_beside_the_database_and_for_the_machine(
    tmp_path: Path,
) -> None:
    db = tmp_path / "data" / "kplay.sqlite3"
    settings = Settings(database_url=f"sqlite:///{db}", cache_dir=tmp_path / "cache", pool_size=3)
    executor = make_executor(settings)
    assert isinstance(executor, LocalExecutor)
    machine = tmp_path / "cache" / "waits" / "embedded-3.json"
    assert executor.durations_files == [db.with_name("kplay.sqlite3-waits.json"), machine]

    on_postgres = Settings(
        database_url="postgresql://kplay@127.0.0.1/test", cache_dir=tmp_path / "cache"
    )
    executor = make_executor(on_postgres)
    assert isinstance(executor, LocalExecutor)
    assert executor.durations_files == [
        tmp_path / "cache" / "waits" / f"embedded-{on_postgres.pool_size}.json"
    ]


def test_a_fresh_data_folder_takes_the_machines_prior_and_both_files_get_the_new_jobs(
    tmp_path: Path,
) -> None:
    beside_db = tmp_path / "fresh" / "kplay.sqlite3-waits.json"
    machine = tmp_path / "cache" / "waits" / "embedded-1.json"
    machine.parent.mkdir(parents=True)
    kept(machine, 7.0)

    executor = LocalExecutor(1, LIMITS, target=OK, durations_file=[beside_db, machine])
    assert executor.durations.prior is not None
    assert executor.durations.samples(FULL) == [7.0] * MIN_SAMPLES
    sink = Sink()
    executor.start(sink)
    try:
        jobs = [job("sleep") for _ in range(3)]
        for j in jobs:
            executor.submit(j)
        sink.wait_results(len(jobs))
    finally:
        executor.stop()
    # The child's first job is left out; the other two are added after the prior's entries,
    # in both files.
    for path in (beside_db, machine):
        found = load(path)
        assert found is not None, path
        entries = found.entries()
        assert [s for _, s in entries[:MIN_SAMPLES]] == [7.0] * MIN_SAMPLES
        assert [k for k, _ in entries[MIN_SAMPLES:]] == [kind_of(jobs[0])] * 2


def test_the_file_beside_the_database_answers_before_the_machines(tmp_path: Path) -> None:
    beside_db, machine = tmp_path / "db-waits.json", tmp_path / "machine.json"
    kept(machine, 7.0)
    kept(beside_db, 2.0)
    executor = LocalExecutor(1, LIMITS, target=OK, durations_file=[beside_db, machine])
    assert executor.durations.samples(FULL) == [2.0] * MIN_SAMPLES
    # An unreadable file beside the database is no prior: the machine's answers.
    beside_db.write_text("{not json")
    executor = LocalExecutor(1, LIMITS, target=OK, durations_file=[beside_db, machine])
    assert executor.durations.samples(FULL) == [7.0] * MIN_SAMPLES
