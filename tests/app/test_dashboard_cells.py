"""The dashboard's per-pair aggregates (`dashboard_cells`) against the runs themselves: a
cohort with every kind of run (tiers, unverified, suspicious, untimed, failed in each way,
done with a failed check, still going, profile runs, a verdict replaced, runs of other
cells) gives the same cells, heatmap, failure groups, best times, stuck list and tally as
the dashboard's earlier reads, which aggregated the runs table on each request (kept here as
the reference). Also: migration 0010 fills the table from runs stored before it, verdicts
of one pair written at once are all counted, and runs claimed by an account move with it.
On SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import random
import threading
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from kplay.app.db.dashcells import DashboardCell
from kplay.app.db.migrate import upgrade
from kplay.app.db.models import Run
from kplay.app.db.session import Database
from kplay.app.services import dashboard_view as view
from kplay.app.services.accounts import Accounts, owner_key
from kplay.app.services.dashboard import CohortState, Dashboards
from kplay.app.services.dashboard_reads import FAILED, FINAL, Cell, Pair
from kplay.app.services.dashboard_roster import roster
from kplay.app.services.progress import CORRECT, RUNNING, TIER, WRONG, Outcome, _number
from kplay.app.services.records import finish_synthetic, json_safe, record_result
from kplay.kernels.models import RunResult, RunState
from tests.app.fakes import compile_error_result, correct_result, wrong_result
from tests.app.storedruns import at, simulated, store, suspicious, unverified, verified
from tests.app.test_dashboard import CATALOG, SAXPY, VADD, _book, job, make_cohort

OUTSIDE = "ch03-triad-exercise"

# ------------------------------------------------ the reference: aggregates of the runs table


def _scope(owners: list[str], exercises: list[str]) -> list[Any]:
    return [Run.user.in_(owners), Run.cell_id.in_(exercises), Run.profile_of.is_(None)]


def reference(
    s: Session, owners: list[str], exercises: list[str], catalog: Mapping[str, Any]
) -> dict[Pair, Cell]:
    """The cells as the dashboard computed them from runs before the aggregates' table."""
    failed, final = Run.state.in_(FAILED), Run.state.in_(FINAL)
    stmt = (
        select(
            Run.user, Run.cell_id, func.count(), func.count().filter(failed),
            func.count().filter(Run.state == "done"), func.count().filter(~final),
            func.min(Run.created_at), func.max(Run.created_at), func.max(Run.updated_at),
            func.min(Run.created_at).filter(failed),
            func.min(Run.created_at).filter(Run.state == "done"),
        )
        .where(*_scope(owners, exercises))
        .group_by(Run.user, Run.cell_id)
    )  # fmt: skip
    cells: dict[Pair, Cell] = {}
    for user, cid, runs, n_failed, n_done, n_open, first, last, changed, ff, fd in s.execute(stmt):
        cell = cells[(user, cid)] = Cell(
            runs=runs, failed=n_failed, done=n_done, first_at=first, last_at=last,
            changed_at=changed,
        )  # fmt: skip
        if n_done:
            cell.rank, cell.progressed_at = CORRECT, fd
        elif n_failed:
            cell.rank, cell.progressed_at = WRONG, ff
        elif n_open:
            cell.rank, cell.progressed_at = RUNNING, first
    groups = (
        select(Run.user, Run.cell_id, Run.state, Run.detail, func.count(), func.max(Run.created_at))
        .where(*_scope(owners, exercises), failed)
        .group_by(Run.user, Run.cell_id, Run.state, Run.detail)
    )
    for user, cid, state, detail, count, latest in s.execute(groups):
        cells[(user, cid)].failures[(state, detail)] = (count, latest)
    r = Run.result
    tiers = (
        select(
            Run.user, Run.cell_id, Run.problem, Run.created_at, r[("check", "ok")],
            r[("roofline", "percent_of_roofline")], r[("roofline", "speedup_over_baseline")],
            r[("timing", "median_us")], r["verified"],
        )
        .where(*_scope(owners, exercises), Run.state == "done")
        .order_by(Run.created_at, Run.id)
    )  # fmt: skip
    best: dict[Pair, tuple[int, int]] = {}
    for user, cid, problem, created, ok, pct, speedup, median, sure in s.execute(tiers):
        cell = cells[(user, cid)]
        found = Outcome(cid, problem, "done", ok in (True, 1), _number(pct), _number(speedup))
        rank, place, tier = found.rank(catalog.get(problem))
        if rank == TIER and sure not in (True, 1):  # a tier needs a verified run
            rank, place, tier = CORRECT, -1, None
        if rank == TIER and (rank, place) > best.get((user, cid), (CORRECT, -1)):
            best[(user, cid)] = (rank, place)
            cell.rank, cell.tier, cell.progressed_at = TIER, tier, created
        us = _number(median)
        if rank >= CORRECT and us is not None and us > 0:
            cell.best_us = us if cell.best_us is None else min(cell.best_us, us)
    return cells


def _fields(cells: Mapping[Pair, Cell]) -> dict[Pair, dict[str, Any]]:
    out = {p: dataclasses.asdict(c) for p, c in cells.items()}
    return {p: {k: v for k, v in fields.items() if k != "seen_at"} for p, fields in out.items()}


def assert_same_dashboard(db: Database, cohort: int) -> CohortState:
    """The table's state against the reference's: every cell and every view alike."""
    found = roster(db, cohort)
    owners, exercises = [x.owner for x in found.learners], list(found.exercises)
    state = Dashboards().state(db, found, CATALOG, wait=True)
    with db.session() as s:
        expected = reference(s, owners, exercises, CATALOG)
    assert _fields(state.cells) == _fields(expected)
    old = CohortState(found.key, loaded=True, failures_ready=True)
    old.put(expected, None)
    shown = view.exercises(_book(), found.exercises)
    by_id = {e.id: e for e in shown}
    for made in (state, old):  # heatmap rows are memoised per state: compare their HTML
        made.memo.clear()
    assert [(r.learner, str(r.cells), r.solved) for r in view.heatmap(found, state, shown)] == [
        (r.learner, str(r.cells), r.solved) for r in view.heatmap(found, old, shown)
    ]
    assert view.clusters(state) == view.clusters(old)
    assert view.times(found, state, shown) == view.times(found, old, shown)
    assert view.tally(found, state, by_id) == view.tally(found, old, by_id)
    now = at(24 * 60)
    for fails, minutes in ((1, 0), (2, 5), (5, 20)):
        assert view.stuck(found, state, shown, now, fails, minutes) == view.stuck(
            found, old, shown, now, fails, minutes
        )
    return state


# ------------------------------------------------------------------ a varied cohort


def _going(db: Database, owner: str, cell: str, minute: float, state: str = "compiling") -> None:
    with db.session() as s:
        s.add(Run(id=uuid.uuid4().hex, created_at=at(minute), updated_at=at(minute), user=owner,
                  cell_id=cell, problem="vector_add", backend="numba-cpu", source="x",
                  state=state))  # fmt: skip


def _profile(db: Database, owner: str, result: RunResult) -> None:
    """A profile run (marked so when it is made, as workers/profiling.py makes them)."""
    with db.session() as s:
        s.add(Run(id=result.job_id, created_at=at(4), updated_at=at(4), user=owner,
                  cell_id=VADD, problem=result.problem, backend=result.backend, source="x",
                  state="queued", profile_of="0" * 32))  # fmt: skip
    record_result(db, result)


def _checked_wrong(cell: str) -> RunResult:
    """Done, timed and on the roofline, but its check failed."""
    result = correct_result(job(cell), 40.0)
    assert result.check is not None
    result.check.ok = False
    return result


KINDS = [
    lambda c: verified(job(c), 45.0),
    lambda c: verified(job(c), 60.0),
    lambda c: unverified(job(c), 55.0),
    lambda c: suspicious(job(c), 5.0),
    lambda c: simulated(job(c)),
    lambda c: correct_result(job(c), 400.0),
    lambda c: wrong_result(job(c)),
    lambda c: compile_error_result(job(c)),
    _checked_wrong,
]


def fill(db: Database, owners: Iterable[str], rng: random.Random) -> None:
    for owner in owners:
        for cell in (VADD, SAXPY):
            for _ in range(rng.randint(0, 6)):
                minute = rng.choice([0, 1, 1, 2, 3, 5, 8, 13])  # ties in time on purpose
                store(db, owner, rng.choice(KINDS)(cell), at(minute), cell=cell)
            if rng.random() < 0.3:
                _going(db, owner, cell, rng.uniform(0, 20), rng.choice(["queued", "timing"]))
        if rng.random() < 0.5:  # a profile run of a fast kernel counts nowhere
            _profile(db, owner, verified(job(VADD), 30.0))
        store(db, owner, verified(job(OUTSIDE), 30.0), at(6), cell=OUTSIDE)


@pytest.fixture
def db(database_url: str) -> Any:
    found = Database(database_url)
    upgrade(found.engine)
    yield found
    found.dispose()


def test_the_table_gives_the_dashboard_of_the_runs(db: Database) -> None:
    names = [f"l{i}" for i in range(9)]
    ids = make_cohort(db, names)
    owners = [owner_key(ids[n]) for n in names]
    fill(db, owners[:-1], random.Random(11))
    # Only going: running. A lost run ended by the server, then its real verdict (a tier).
    _going(db, owners[-1], SAXPY, 30)
    lost = store(db, owners[1], wrong_result(job(SAXPY)), at(31), cell=SAXPY)
    with db.session() as s:
        run = s.get(Run, lost)
        assert run is not None
    finish_synthetic(db, run, RunState.runtime_error, "lost")
    real = verified(job(SAXPY), 45.0)
    record_result(db, real.model_copy(update={"job_id": lost}))
    state = assert_same_dashboard(db, ids["cohort"])
    keys = {state.cell(o, c).key for o in owners for c in (VADD, SAXPY)}
    assert {"tier", "wrong", "running", "correct"} <= keys
    assert state.cell(owners[1], SAXPY).tier is not None
    # A suspicious run alone: a failure, never a tier nor a time.
    loner = owner_key(make_cohort(db, ["sus"], instructor="t2")["sus"])
    store(db, loner, suspicious(job(VADD), 5.0), at(1), cell=VADD)
    with db.session() as s:
        cell = reference(s, [loner], [VADD], CATALOG)[(loner, VADD)]
        row = s.get(DashboardCell, (loner, VADD))
    assert cell.rank == WRONG and cell.best_us is None
    assert row is not None and row.tier_place is None and row.best_us is None and row.failed == 1


def test_only_a_verified_run_gives_a_tier(db: Database) -> None:
    ids = make_cohort(db, ["ana", "bo"])
    ana, bo = owner_key(ids["ana"]), owner_key(ids["bo"])
    # Both pass their check at 45 us, on the roofline well enough for a tier.
    store(db, ana, unverified(job(VADD), 45.0), at(1), cell=VADD)
    store(db, bo, verified(job(VADD), 45.0), at(1), cell=VADD)
    state = assert_same_dashboard(db, ids["cohort"])
    assert state.cell(ana, VADD).key == "correct" and state.cell(ana, VADD).tier is None
    assert state.cell(bo, VADD).key == "tier" and state.cell(bo, VADD).tier is not None
    with db.session() as s:
        row = s.get(DashboardCell, (ana, VADD))
    assert row is not None and row.tier_place is None and row.done == 1
    # Its verified run later: the tier, reached then.
    store(db, ana, verified(job(VADD), 45.0), at(2), cell=VADD)
    state = assert_same_dashboard(db, ids["cohort"])
    assert state.cell(ana, VADD).tier == state.cell(bo, VADD).tier
    assert state.cell(ana, VADD).progressed_at == at(2)


def test_the_migration_fills_the_table_from_stored_runs(database_url: str) -> None:
    db = Database(database_url)
    try:
        upgrade(db.engine, "0009_sso_lti")
        ids = make_cohort(db, ["a", "b", "c"])
        rng, rows = random.Random(5), []
        for name in ("a", "b", "c"):
            for n in range(12):
                cell = (VADD, SAXPY)[n % 2]
                result = rng.choice(KINDS)(cell)
                going = rng.random() < 0.1
                created = at(rng.uniform(0, 60))
                rows.append({
                    "id": uuid.uuid4().hex, "created_at": created, "updated_at": created,
                    "user": owner_key(ids[name]), "cell_id": cell, "problem": result.problem,
                    "backend": result.backend, "source": "x",
                    "state": "checking" if going else result.state.value,
                    "detail": None if going else result.message,
                    "result": None if going else json_safe(result.model_dump(mode="json")),
                })  # fmt: skip
        with db.engine.begin() as conn:
            conn.execute(insert(Run), rows)
        upgrade(db.engine)
        with db.session() as s:
            assert s.scalar(select(func.count()).select_from(DashboardCell)) == 6
        assert_same_dashboard(db, ids["cohort"])
    finally:
        db.dispose()


def test_verdicts_of_one_pair_at_once_are_all_counted(db: Database) -> None:
    ids = make_cohort(db, ["ana"])
    ana = owner_key(ids["ana"])
    start = threading.Barrier(6)
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            start.wait()
            kind = KINDS[i % len(KINDS)]
            for k in range(3):
                store(db, ana, kind(VADD), at(i + k / 10), cell=VADD)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    state = assert_same_dashboard(db, ids["cohort"])
    assert state.cell(ana, VADD).runs == 18


def test_runs_claimed_by_an_account_move_with_it(db: Database) -> None:
    ids = make_cohort(db, ["ana"])
    reader = "reader:0123456789abcdef"
    store(db, reader, verified(job(VADD), 45.0), at(1), cell=VADD)
    store(db, reader, wrong_result(job(SAXPY)), at(2), cell=SAXPY)
    assert Accounts(db).claim_runs(reader, ids["ana"]) == 2
    state = assert_same_dashboard(db, ids["cohort"])
    assert state.cell(owner_key(ids["ana"]), VADD).key == "tier"
    with db.session() as s:
        left = s.scalars(select(DashboardCell).where(DashboardCell.user == reader)).all()
    assert all(row.runs == 0 for row in left)


def test_an_update_reads_the_table_again(db: Database) -> None:
    ids = make_cohort(db, ["ana", "bo"])
    ana = owner_key(ids["ana"])
    boards, found = Dashboards(), roster(db, ids["cohort"])
    store(db, ana, wrong_result(job(VADD)), at(0), cell=VADD)
    state = boards.state(db, found, CATALOG, wait=True)
    assert state.cell(ana, VADD).key == "wrong"
    store(db, ana, verified(job(VADD), 45.0), at(1), cell=VADD)  # its verdict is news
    assert boards.state(db, found, CATALOG) is state
    assert state.cell(ana, VADD).key == "tier"
    with db.session() as s:
        expected = reference(s, [ana], [VADD, SAXPY], CATALOG)
    assert _fields(state.cells) == _fields(expected)


def test_migration_0010_matches_the_model_and_goes_down(database_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import inspect

    from kplay.app.db.models import Base
    from tests.app.test_sso import upgrade_to

    db = Database(database_url)
    try:
        upgrade(db.engine)
        with db.engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            found = compare_metadata(ctx, Base.metadata)
        diffs = [d for d in found if "dashboard_cells" in repr(d)]
        assert diffs == [], f"migration 0010 and app/db/dashcells.py differ: {diffs}"
        upgrade_to(db, "0009_sso_lti")
        assert "dashboard_cells" not in inspect(db.engine).get_table_names()
    finally:
        db.dispose()
