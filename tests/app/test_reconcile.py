"""Distributed mode: unfinished runs are checked against the executor, and only the runs that
vanished end; embedded mode ends every unfinished run because its pool died with it."""

from __future__ import annotations

import time
from datetime import timedelta

from fastapi.testclient import TestClient

from kplay.app.db.migrate import upgrade
from kplay.app.db.models import Run
from kplay.app.db.session import Database
from kplay.app.main import create_app
from kplay.app.services.reconcile import LOST, end_vanished
from kplay.config import Settings
from kplay.kernels.models import RunState
from tests.app.conftest import TEST_SECRET_KEY
from tests.app.fakes import FakeExecutor, correct_result

GOOD = {"problem": "vector_add", "backend": "numba-cpu", "source": "x = 1\n"}


class Remote(FakeExecutor):
    """Stands for the CeleryExecutor: knows which of the given runs still exist somewhere."""

    def __init__(self, vanished: set[str] | None = None) -> None:
        super().__init__(hold=True)
        self.vanished = vanished or set()
        self.asked: list[list[str]] = []

    def reconcile(self, known_unfinished_job_ids: list[str]) -> list[str]:
        self.asked.append(list(known_unfinished_job_ids))
        return [i for i in known_unfinished_job_ids if i in self.vanished]


def _add(db: Database, run_id: str, state: str, quiet_s: float) -> None:
    with db.session() as s:
        run = Run(
            id=run_id, user="u", problem="vector_add", backend="cuda", source="x", state=state
        )
        s.add(run)
        s.flush()
        run.updated_at = run.updated_at - timedelta(seconds=quiet_s)


def test_only_quiet_vanished_runs_are_requeued(database_url: str) -> None:
    db = Database(database_url)
    upgrade(db.engine)
    _add(db, "a" * 32, "queued", quiet_s=60)  # vanished
    _add(db, "b" * 32, "timing", quiet_s=60)  # still on a worker
    _add(db, "c" * 32, "queued", quiet_s=0)  # just stored: not judged yet
    _add(db, "d" * 32, "done", quiet_s=60)  # finished: not asked about
    remote = Remote(vanished={"a" * 32, "c" * 32})
    assert end_vanished(db, remote, quiet_for_s=15) == 0
    assert sorted(remote.asked[0]) == ["a" * 32, "b" * 32]
    assert [j.job_id for j in remote.jobs] == ["a" * 32]  # handed to the queue again
    assert remote.jobs[0].source == "x" and remote.jobs[0].problem == "vector_add"
    with db.session() as s:
        states = {r.id[0]: (r.state, r.detail) for r in s.query(Run)}
    assert states["a"][0] == "queued" and "queued again" in (states["a"][1] or "")
    assert states["b"][0] == "timing" and states["c"][0] == "queued"
    db.dispose()


def test_a_run_lost_again_and_again_ends_as_lost(database_url: str) -> None:
    db = Database(database_url)
    upgrade(db.engine)
    _add(db, "a" * 32, "queued", quiet_s=60)
    remote = Remote(vanished={"a" * 32})
    requeues: dict[str, int] = {}
    ended = [end_vanished(db, remote, quiet_for_s=0, requeues=requeues) for _ in range(3)]
    assert ended == [0, 0, 1] and len(remote.jobs) == 2
    with db.session() as s:
        run = s.get(Run, "a" * 32)
        assert run is not None and (run.state, run.detail) == ("runtime_error", LOST)
    db.dispose()


def test_a_vanished_run_the_queue_refuses_ends_as_lost(database_url: str) -> None:
    db = Database(database_url)
    upgrade(db.engine)
    _add(db, "a" * 32, "queued", quiet_s=60)
    remote = Remote(vanished={"a" * 32})
    remote.refuse = "no worker can run cuda jobs right now"
    assert end_vanished(db, remote, quiet_for_s=0) == 1
    db.dispose()


def test_a_restart_in_distributed_mode_keeps_runs_that_are_alive(database_url: str) -> None:
    settings = Settings(
        database_url=database_url,
        reconcile_quiet_s=0,
        reconcile_interval_s=60,
        secret_key=TEST_SECRET_KEY,
    )
    first = Remote()
    with TestClient(create_app(settings, first)) as client:
        alive = client.post("/api/v1/runs", json=GOOD).json()["id"]
        gone = client.post("/api/v1/runs", json=GOOD).json()["id"]
        session = dict(client.cookies)
    second = Remote(vanished={gone})
    with TestClient(create_app(settings, second), cookies=session) as client:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not second.asked:
            time.sleep(0.05)
        time.sleep(0.2)
        runs = {i: client.get(f"/api/v1/runs/{i}").json() for i in (alive, gone)}
    assert sorted(second.asked[0]) == sorted([alive, gone])
    # The vanished run is handed to the queue again; the live one is left alone.
    assert runs[gone]["state"] == "queued" and "queued again" in runs[gone]["detail"]
    assert [j.job_id for j in second.jobs] == [gone]
    assert runs[alive]["state"] == "queued"  # still on its way: not ended by the restart


def test_a_verdict_delivered_during_reconcile_is_recorded(database_url: str) -> None:
    class Delivering(Remote):
        def reconcile(self, known_unfinished_job_ids: list[str]) -> list[str]:
            for job in self.jobs:
                if job.job_id in known_unfinished_job_ids and self.sink is not None:
                    self.sink.on_result(correct_result(job))
            return []

    settings = Settings(database_url=database_url, reconcile_quiet_s=0, reconcile_interval_s=0.1)
    executor = Delivering()
    with TestClient(create_app(settings, executor)) as client:
        run_id = client.post("/api/v1/runs", json=GOOD).json()["id"]
        deadline = time.monotonic() + 10
        state = "queued"
        while time.monotonic() < deadline and state != "done":
            state = client.get(f"/api/v1/runs/{run_id}").json()["state"]
            time.sleep(0.05)
    assert state == RunState.done.value
