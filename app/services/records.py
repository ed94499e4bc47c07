"""Writing what executors report into the runs table, from whatever thread reports it."""

from __future__ import annotations

import base64
import logging
import math
from datetime import datetime
from typing import Any

from sqlalchemy import select

from kplay.app.db.models import ProfileReport, Run, utcnow
from kplay.app.db.session import Database
from kplay.kernels.models import FINAL_STATES, ProgressEvent, RunResult, RunState

log = logging.getLogger(__name__)

INTERRUPTED = "interrupted: the server stopped before this run finished; run it again"
NON_FINAL = tuple(s.value for s in RunState if s not in FINAL_STATES)


def json_safe(value: Any) -> Any:
    """JSON that every database and client accepts: NaN and infinities become strings.

    A kernel that never writes an element leaves the NaN poison there, so "got: NaN" is
    common and worth keeping; PostgreSQL's json type and strict JSON parsers reject the bare
    token, while the result models read the strings back as floats.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value


def is_final(state: str) -> bool:
    return state in {s.value for s in FINAL_STATES}


def record_event(db: Database, event: ProgressEvent) -> None:
    now = utcnow()
    with db.session() as s:
        run = s.get(Run, event.job_id)
        if run is None:
            log.warning("progress for unknown run %s dropped", event.job_id)
            return
        if is_final(run.state):
            return  # a late event never reopens a finished run
        if not event.state.is_final:
            run.state = event.state.value
        if event.state is not RunState.queued and run.started_at is None:
            run.started_at = now
        run.detail = event.detail
        run.updated_at = now


def record_result(db: Database, result: RunResult) -> None:
    """Store a verdict. A real result replaces a synthetic one (lost, interrupted)."""
    now = utcnow()
    with db.session() as s:
        run = s.get(Run, result.job_id)
        if run is None:
            log.warning("result for unknown run %s dropped", result.job_id)
            return
        run.state = result.state.value
        run.detail = result.message
        if result.profile is not None and result.profile.report_b64:
            # The report is kept apart; the result keeps its size (report_bytes).
            data = base64.b64decode(result.profile.report_b64)
            s.merge(ProfileReport(run_id=run.id, data=data))
            profile = result.profile.model_copy(update={"report_b64": None})
            result = result.model_copy(update={"profile": profile})
        run.result = json_safe(result.model_dump(mode="json"))
        run.finished_at = now
        run.started_at = run.started_at or now
        run.updated_at = now
        if run.cell_id is not None and run.profile_of is None:
            # The dashboard's row of the pair counts this verdict, in its transaction.
            from kplay.app.services.dashboard_cells import refresh  # it reads progress's rules

            s.flush()
            refresh(s, [(run.user, run.cell_id)])


def finish_synthetic(db: Database, run: Run, state: RunState, message: str) -> None:
    """End a run the executor will never report on (refused, lost, interrupted)."""
    result = RunResult(
        job_id=run.id, problem=run.problem, backend=run.backend, state=state, message=message
    )
    record_result(db, result)


def reconcile_interrupted(db: Database, message: str = INTERRUPTED) -> int:
    """Mark every unfinished run as ended by the stop; returns how many there were."""
    with db.session() as s:
        stuck = list(s.scalars(select(Run).where(Run.state.in_(NON_FINAL))))
    for run in stuck:
        finish_synthetic(db, run, RunState.runtime_error, message)
    if stuck:
        log.warning("%d unfinished run(s) marked interrupted", len(stuck))
    return len(stuck)


class DatabaseSink:
    """The executor's ResultSink: every event and result goes to the database, watched or not."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def on_event(self, event: ProgressEvent) -> None:
        try:
            record_event(self.db, event)
        except Exception:  # noqa: BLE001 - a progress line is not worth killing a worker thread
            log.exception("could not record progress for %s", event.job_id)

    def on_result(self, result: RunResult) -> None:
        # A result must not be lost to a transient lock: try again before giving up.
        for attempt in range(3):
            try:
                record_result(self.db, result)
                return
            except Exception:  # noqa: BLE001
                log.exception("could not record result for %s (try %d)", result.job_id, attempt)


def age_s(since: datetime) -> float:
    return (utcnow() - since).total_seconds()
