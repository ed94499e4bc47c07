"""Grading a submission: its run's source runs again, and the verdict becomes the submission's.

The grading run goes through RunService's own path (stored first, then handed to the
executor; the reader's cap on runs in flight counts it), for the learner, on the
assignment's device kind where it names one, with the assignment's hidden seed as the job's
secret seed (RunJob.secret_seed; kernels/seeds.py) so the checker's inputs derive from it
and from nothing the learner can know, and with the exercise's hidden grading cases
(RunJob.hidden_cases; kernels/hiddencases.py), checked after the problem's own. The run is
no attempt of the cell (like a profile run, `cell_id` stays empty), and its submission's
`graded_run_id` marks it as a grading run.

Once the grading run is final, the submission is "graded" when the run is correct (done,
every check right), with the run's share of the roofline in percent as its score where it
was timed and placed, else "failed". `settle` applies that to pending submissions whenever
they are read.
"""

from __future__ import annotations

from sqlalchemy import select

from kplay.app.db.classroom import Submission
from kplay.app.db.models import Run
from kplay.app.db.session import Database
from kplay.app.services import cohorts as co
from kplay.app.services.ltigrades import scores_settled
from kplay.app.services.records import is_final
from kplay.app.services.runs import RunInputError, RunRequest, RunService
from kplay.kernels.models import GradingCase, LaunchOverride, RunState


def verdict(run: Run) -> tuple[str, float | None]:
    """(submission state, score) that a final grading run gives."""
    result = run.result or {}
    check = result.get("check") or {}
    if run.state != RunState.done.value or check.get("ok") is not True:
        return "failed", None
    roof = result.get("roofline") or {}
    percent = roof.get("percent_of_roofline")
    if isinstance(percent, int | float) and not isinstance(percent, bool) and percent == percent:
        return "graded", round(float(percent), 1)
    return "graded", None


def start_grading(
    runs: RunService,
    run: Run,
    owner: str,
    device: str | None,
    seed: int | None,
    cases: list[GradingCase] | None = None,
) -> Run:
    """The grading run: the same source through RunService's path, on the secret seed, with
    the exercise's hidden cases (app/services/gradingcases.py) after the problem's own."""
    req = RunRequest(
        problem=run.problem,
        backend=run.backend,
        source=run.source,
        cell=run.cell_id,
        launch=LaunchOverride.model_validate(run.launch) if run.launch else None,
        device=device,
    )
    try:
        return runs.create(req, owner, secret_seed=seed, attempt=False, hidden_cases=cases)
    except RunInputError as exc:
        raise co.CohortError(exc.status, f"this run cannot be graded: {exc.message}") from None


def settle(db: Database, rows: list[Submission]) -> None:
    """Give each pending submission whose grading run has ended its state and score."""
    pending = {r.graded_run_id: r for r in rows if r.state == "pending" and r.graded_run_id}
    if not pending:
        return
    settled: list[tuple[int, str, str, float | None]] = []
    with db.session() as s:
        runs = s.scalars(select(Run).where(Run.id.in_(list(pending))))
        for run in runs:
            if not is_final(run.state):
                continue
            state, score = verdict(run)
            row = pending[run.id]
            row.state, row.score = state, score
            stored = s.get(Submission, row.id)
            if stored is not None and stored.state == "pending":
                stored.state, stored.score = state, score
                settled.append((stored.user_id, stored.exercise, state, score))
    scores_settled(db, settled)  # to an LMS that asked for them (app/services/ltigrades.py)
