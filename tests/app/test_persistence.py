"""Runs in the database, on SQLite and PostgreSQL: stored before submit, recorded when results
arrive, kept across restarts, and never left unfinished."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import inspect, select

from kplay.app.db.migrate import upgrade
from kplay.app.db.models import Run
from kplay.app.db.session import Database
from kplay.app.main import create_app
from kplay.app.services.records import INTERRUPTED, DatabaseSink, reconcile_interrupted
from kplay.config import Settings
from kplay.kernels.models import ProgressEvent, RunJob, RunState
from tests.app.conftest import TEST_SECRET_KEY
from tests.app.fakes import FakeExecutor, correct_result, wrong_result

GOOD = {
    "problem": "vector_add",
    "backend": "numba-cpu",
    "source": "import numba\n\n@numba.njit\ndef vector_add(a, b, out, n):\n    pass\n",
    "cell": "ch01-vadd-cpu",
}


def rows(url: str) -> list[Run]:
    db = Database(url)
    try:
        with db.session() as s:
            return list(s.scalars(select(Run).order_by(Run.created_at)))
    finally:
        db.dispose()


class Witness(FakeExecutor):
    """Looks in the database at the moment of submit."""

    def __init__(self, url: str) -> None:
        super().__init__(hold=True)
        self.url = url
        self.seen: list[str] = []

    def submit(self, job: RunJob) -> None:
        self.seen = [f"{r.id}:{r.state}" for r in rows(self.url)]
        super().submit(job)


def test_migrations_create_the_table_and_are_idempotent(database_url: str) -> None:
    db = Database(database_url)
    upgrade(db.engine)
    upgrade(db.engine)
    columns = {c["name"] for c in inspect(db.engine).get_columns("runs")}
    assert {"id", "state", "result", "launch", "cell_id", "user", "finished_at"} <= columns
    db.dispose()


def test_row_is_stored_before_submit(database_url: str) -> None:
    executor = Witness(database_url)
    with TestClient(create_app(Settings(database_url=database_url), executor)) as client:
        run_id = client.post("/api/v1/runs", json=GOOD).json()["id"]
    assert executor.seen == [f"{run_id}:queued"]


def test_results_are_recorded_with_nobody_watching(database_url: str) -> None:
    executor = FakeExecutor(hold=True)
    with TestClient(create_app(Settings(database_url=database_url), executor)) as client:
        run_id = client.post("/api/v1/runs", json=GOOD).json()["id"]
        executor.release(run_id)  # no GET in between: the sink writes on its own
        [run] = rows(database_url)
    assert run.state == "done" and run.finished_at is not None and run.started_at is not None
    assert run.result is not None and run.result["timing"]["median_us"] == 100.0
    assert run.finished_at >= run.created_at


def test_runs_survive_a_restart_and_unfinished_ones_are_reconciled(database_url: str) -> None:
    # The same key after the restart: the reader's session, and so its runs, carry over.
    settings = Settings(database_url=database_url, secret_key=TEST_SECRET_KEY)
    first = FakeExecutor(hold=True)
    with TestClient(create_app(settings, first)) as client:
        done_id = client.post("/api/v1/runs", json=GOOD).json()["id"]
        first.release(done_id)
        stuck_id = client.post("/api/v1/runs", json=GOOD).json()["id"]
        first.progress(stuck_id, RunState.timing, "rep 12")
        session = dict(client.cookies)
    assert first.stopped
    with TestClient(create_app(settings, FakeExecutor()), cookies=session) as client:
        done = client.get(f"/api/v1/runs/{done_id}").json()
        stuck = client.get(f"/api/v1/runs/{stuck_id}").json()
        listed = client.get("/api/v1/cells/ch01-vadd-cpu/runs").json()
        card = client.get(f"/runs/{stuck_id}/card").text
    assert done["state"] == "done" and done["result"]["state"] == "done"
    assert stuck["state"] == "runtime_error" and stuck["detail"] == INTERRUPTED
    assert stuck["result"]["message"] == INTERRUPTED
    assert [r["id"] for r in listed] == [stuck_id, done_id]
    assert "Runtime error" in card and "run it again" in card and "hx-trigger" not in card


def test_reconcile_at_start_covers_a_crash(database_url: str) -> None:
    """A server killed outright never ran its shutdown: the next start still ends the run."""
    db = Database(database_url)
    upgrade(db.engine)
    with db.session() as s:
        s.add(
            Run(
                id="a" * 32,
                user="u",
                problem="vector_add",
                backend="numba-cpu",
                source="x",
                state="checking",
            )
        )
    assert reconcile_interrupted(db) == 1
    assert reconcile_interrupted(db) == 0
    with db.session() as s:
        run = s.get(Run, "a" * 32)
        assert run is not None and run.state == "runtime_error" and run.detail == INTERRUPTED
    db.dispose()


def test_late_event_never_reopens_a_finished_run(database_url: str) -> None:
    db = Database(database_url)
    upgrade(db.engine)
    job = RunJob(problem="vector_add", backend="numba-cpu", source="x")
    with db.session() as s:
        s.add(
            Run(
                id=job.job_id,
                user="u",
                problem=job.problem,
                backend=job.backend,
                source="x",
                state="queued",
            )
        )
    sink = DatabaseSink(db)
    sink.on_event(ProgressEvent(job_id=job.job_id, state=RunState.compiling, detail="go"))
    sink.on_result(correct_result(job))
    sink.on_event(ProgressEvent(job_id=job.job_id, state=RunState.timing, detail="late"))
    sink.on_event(ProgressEvent(job_id="f" * 32, state=RunState.timing))  # unknown: dropped
    with db.session() as s:
        run = s.get(Run, job.job_id)
        assert run is not None and run.state == "done" and run.detail != "late"
    db.dispose()


def test_a_run_nobody_works_on_is_declared_lost(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    executor = FakeExecutor(hold=True)
    settings = Settings(database_url=database_url, stale_after_s=60)
    with TestClient(create_app(settings, executor)) as client:
        run_id = client.post("/api/v1/runs", json=GOOD).json()["id"]
        executor.pending.clear()  # the executor forgot it (a worker died with it)
        assert client.get(f"/api/v1/runs/{run_id}").json()["state"] == "queued"
        db = client.app.state.services.db  # type: ignore[attr-defined]
        with db.session() as s:
            run = s.get(Run, run_id)
            run.updated_at = run.updated_at - timedelta(seconds=120)
        lost = client.get(f"/api/v1/runs/{run_id}").json()
    assert lost["state"] == "runtime_error" and lost["detail"].startswith("lost:")


def test_history_is_per_user(database_url: str) -> None:
    settings = Settings(database_url=database_url, anonymous_user="alice")
    with TestClient(create_app(settings, FakeExecutor())) as client:
        client.post("/api/v1/runs", json=GOOD)
    settings = Settings(database_url=database_url, anonymous_user="bob")
    with TestClient(create_app(settings, FakeExecutor())) as client:
        assert client.get("/api/v1/cells/ch01-vadd-cpu/runs").json() == []
        client.post("/api/v1/runs", json=GOOD)
        assert len(client.get("/api/v1/cells/ch01-vadd-cpu/runs").json()) == 1
    owners = sorted(r.user for r in rows(database_url))
    assert [o.split("-")[0] for o in owners] == ["alice", "bob"]
    assert all(len(o.split("-")[1]) == 32 for o in owners)  # the full reader id


def test_nan_in_a_result_is_stored_and_served(database_url: str) -> None:
    """An element the kernel never wrote reads back as NaN: keep it, on every database."""
    executor = FakeExecutor(script=wrong_result)
    with TestClient(create_app(Settings(database_url=database_url), executor)) as client:
        run_id = client.post("/api/v1/runs", json=GOOD).json()["id"]
        run = client.get(f"/api/v1/runs/{run_id}")
        card = client.get(f"/runs/{run_id}/card").text
    assert run.status_code == 200
    failing = run.json()["result"]["check"]["cases"][1]
    assert run.json()["state"] == "wrong" and failing["got"] == "NaN"
    assert '<td class="num">NaN</td>' in card
