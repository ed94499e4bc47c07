"""Ending runs that nothing will ever finish, without ending runs that are merely elsewhere.

Embedded mode: the pool dies with the server, so every unfinished run is ended at start and at
stop (records.reconcile_interrupted). Distributed mode: a run may still be on a worker while
the web app restarts, so an executor that can tell (one that is `Reconciling`, the
CeleryExecutor) is asked which unfinished runs vanished, at start and then periodically;
those are queued again (twice at most) and then end.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

from sqlalchemy import select

from kplay.app.db.models import Run, utcnow
from kplay.app.db.session import Database
from kplay.app.executors import Reconciling
from kplay.app.services.gradingcases import grading_options
from kplay.app.services.records import NON_FINAL, finish_synthetic
from kplay.kernels.models import LaunchOverride, RunJob, RunState
from kplay.workers.executor import SubmitRefused

log = logging.getLogger(__name__)

LOST = "lost: no worker has this run any more (the queue may have restarted); run it again"


def unfinished(db: Database, quiet_for_s: float) -> list[Run]:
    """Unfinished runs with no news for `quiet_for_s`: a run stored a moment ago may not have
    reached the queue yet, and must not be judged lost for that."""
    cutoff = utcnow() - timedelta(seconds=quiet_for_s)
    stmt = select(Run).where(Run.state.in_(NON_FINAL), Run.updated_at <= cutoff)
    with db.session() as s:
        return list(s.scalars(stmt))


MAX_REQUEUES = 2


def job_of(run: Run, db: Database | None = None) -> RunJob:
    """The job a stored run stands for, with the run's own id; a grading run's again with its
    assignment's secret seed, hidden cases and device kind (app/services/gradingcases.py)."""
    launch = LaunchOverride.model_validate(run.launch) if run.launch else None
    return RunJob(
        job_id=run.id,
        problem=run.problem,
        backend=run.backend,
        source=run.source,
        cell=run.cell_id,
        launch=launch,
        user=run.user,
        **(grading_options(db, run.id) if db is not None else {}),
    )


def requeue(db: Database, executor: Reconciling, run: Run, attempt: int) -> bool:
    """Hand a vanished run to the queue again; False when the queue refuses it."""
    try:
        executor.submit(job_of(run, db))
    except SubmitRefused:
        return False
    with db.session() as s:
        row = s.get(Run, run.id)
        if row is not None and row.state in NON_FINAL:
            row.state = RunState.queued.value
            row.detail = f"queued again: the queue lost it (attempt {attempt + 1})"
            row.updated_at = utcnow()
    return True


def end_vanished(
    db: Database,
    executor: Reconciling,
    quiet_for_s: float,
    requeues: dict[str, int] | None = None,
) -> int:
    """One pass: vanished runs go back in the queue (twice at most), then end as lost.

    The database holds everything a job needs, so a broker that forgot its queue (a Redis
    restart without persistence) costs a delay, not the run. Returns how many ended.
    """
    runs = {run.id: run for run in unfinished(db, quiet_for_s)}
    if not runs:
        return 0
    requeues = {} if requeues is None else requeues
    vanished = [job_id for job_id in executor.reconcile(list(runs)) if job_id in runs]
    ended = 0
    for job_id in vanished:
        attempt = requeues.get(job_id, 0)
        if attempt < MAX_REQUEUES and requeue(db, executor, runs[job_id], attempt):
            requeues[job_id] = attempt + 1
            continue
        finish_synthetic(db, runs[job_id], RunState.runtime_error, LOST)
        requeues.pop(job_id, None)
        ended += 1
    if vanished:
        log.warning(
            "%d run(s) vanished from the queue: %d requeued, %d ended",
            len(vanished),
            len(vanished) - ended,
            ended,
        )
    return ended


class Reconciler:
    """Runs end_vanished now and then every `interval_s`, on a thread of its own."""

    def __init__(
        self, db: Database, executor: Reconciling, interval_s: float, quiet_for_s: float
    ) -> None:
        self.db = db
        self.executor = executor
        self.interval_s = interval_s
        self.quiet_for_s = quiet_for_s
        self._requeues: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="kplay-reconcile", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                end_vanished(self.db, self.executor, self.quiet_for_s, self._requeues)
            except Exception:  # noqa: BLE001 - the broker may be away; try again later
                log.exception("reconciling unfinished runs failed; will try again")
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
