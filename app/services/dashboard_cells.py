"""The dashboard's per-(learner, exercise) aggregates (table `dashboard_cells`): made again
from a pair's finished runs whenever one of them gets its verdict (`refresh`, in the
verdict's own transaction), and read with the runs still going added (`read_cells`).

What counts: runs of a cell that are not profile runs; a run that ended done is correct
whatever its check says, and every other final state is a failure. A tier comes only from a
verified run, by the rule the leaderboards use (done, its check passed and its result's
`verified` true: timed on real hardware, on secret seeds, within the device's ceilings), so
an unverified, simulated or suspicious run never reaches one; a best time comes from done
runs whose check passed (a suspicious run, never done, reaches neither).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ARRAY,
    Connection,
    String,
    any_,
    bindparam,
    case,
    delete,
    func,
    select,
    tuple_,
    type_coerce,
)
from sqlalchemy.orm import Session

from kplay.app.db.dashcells import DashboardCell
from kplay.app.db.models import Run, UTCDateTime
from kplay.app.services.dashboard_reads import FINAL, Cell, Pair
from kplay.app.services.progress import CORRECT, RUNNING, TIER, WRONG, Outcome, _number
from kplay.kernels.models import FINAL_STATES, RunState
from kplay.kernels.problem import ProblemSpec, Tier

NON_FINAL = tuple(sorted(s.value for s in RunState if s not in FINAL_STATES))
TABLE = DashboardCell.__table__
Bind = Session | Connection


def _scope(pairs: list[Pair] | None) -> list[Any]:
    out = [Run.profile_of.is_(None), Run.cell_id.is_not(None), Run.state.in_(FINAL)]
    if pairs is not None:
        out += [
            Run.user.in_(sorted({u for u, _c in pairs})),
            Run.cell_id.in_(sorted({c for _u, c in pairs})),
        ]
    return out


def compute(
    bind: Bind, pairs: list[Pair] | None, catalog: Mapping[str, ProblemSpec]
) -> dict[Pair, dict[str, Any]]:
    """The rows of `pairs` (every pair when None) from their finished runs."""
    wanted = None if pairs is None else set(pairs)
    rows: dict[Pair, dict[str, Any]] = {}
    groups: dict[Pair, dict[tuple[str, str | None], list[Any]]] = {}
    stmt = select(Run.user, Run.cell_id, Run.state, Run.detail, Run.created_at, Run.updated_at)
    for user, cell_id, state, detail, created, updated in bind.execute(stmt.where(*_scope(pairs))):
        pair = (user, cell_id)
        if wanted is not None and pair not in wanted:
            continue
        row = rows.get(pair)
        if row is None:
            row = rows[pair] = _empty(pair)
            row.update(first_at=created, last_at=created, changed_at=updated)
        row["runs"] += 1
        row["first_at"] = min(row["first_at"], created)
        row["last_at"] = max(row["last_at"], created)
        row["changed_at"] = max(row["changed_at"], updated)
        key = "first_done_at" if state == "done" else "first_failed_at"
        row["done" if state == "done" else "failed"] += 1
        row[key] = created if row[key] is None else min(row[key], created)
        if state != "done":
            group = groups.setdefault(pair, {}).setdefault((state, detail), [0, created])
            group[0] += 1
            group[1] = max(group[1], created)
    for pair, found in groups.items():
        rows[pair]["failures"] = [[s, d, n, at.isoformat()] for (s, d), (n, at) in found.items()]
    _tiers(bind, pairs, rows, catalog)
    return rows


def _empty(pair: Pair) -> dict[str, Any]:
    return {
        "user": pair[0], "cell_id": pair[1], "runs": 0, "failed": 0, "done": 0,
        "first_at": None, "last_at": None, "changed_at": None,
        "first_failed_at": None, "first_done_at": None,
        "tier_problem": None, "tier_place": None, "tier_name": None, "tier_at": None,
        "best_us": None, "failures": None,
    }  # fmt: skip


def _tiers(
    bind: Bind,
    pairs: list[Pair] | None,
    rows: dict[Pair, dict[str, Any]],
    catalog: Mapping[str, ProblemSpec],
) -> None:
    """Each pair's best tier (the first run, in submission order, that reached it) and best
    time, from its done runs' stored results: the only read of stored results."""
    r = Run.result
    stmt = (
        select(
            Run.user,
            Run.cell_id,
            Run.problem,
            Run.created_at,
            r[("check", "ok")],
            r[("roofline", "percent_of_roofline")],
            r[("roofline", "speedup_over_baseline")],
            r[("timing", "median_us")],
            r["verified"],
        )
        .where(*_scope(pairs), Run.state == "done")
        .order_by(Run.created_at, Run.id)
    )
    best: dict[Pair, tuple[int, int]] = {}
    for user, cell_id, problem, created, ok, pct, speedup, median, verified in bind.execute(stmt):
        row = rows.get((user, cell_id))
        if row is None:
            continue
        # SQLite's JSON_EXTRACT reads a JSON true as 1; PostgreSQL gives True.
        found = Outcome(cell_id, problem, "done", ok in (True, 1), _number(pct), _number(speedup))
        rank, place, tier = found.rank(catalog.get(problem))
        if tier is not None and verified not in (True, 1):
            rank, place, tier = CORRECT, -1, None  # an unverified run reaches no tier
        if tier is not None and (rank, place) > best.get((user, cell_id), (CORRECT, -1)):
            best[(user, cell_id)] = (rank, place)
            row.update(tier_problem=problem, tier_place=place, tier_name=tier.name)
            row["tier_at"] = created
        us = _number(median)
        if rank >= CORRECT and us is not None and us > 0:
            row["best_us"] = us if row["best_us"] is None else min(row["best_us"], us)


def _dialect(bind: Bind) -> str:
    return (bind.get_bind() if isinstance(bind, Session) else bind).dialect.name


def _insert(bind: Bind) -> Any:
    if _dialect(bind) == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert


def snapshot(s: Session) -> None:
    """Make the session's reads see one snapshot (PostgreSQL; SQLite's reads always do): a
    verdict written between two of them is then counted once, not twice or never. Call it
    before the session's first statement."""
    if _dialect(s) == "postgresql":
        s.connection(execution_options={"isolation_level": "REPEATABLE READ"})


def refresh(
    bind: Bind, pairs: Iterable[Pair], catalog: Mapping[str, ProblemSpec] | None = None
) -> None:
    """Make `pairs`' rows again from their finished runs, in the caller's transaction.

    Each row is locked first (made empty if it was missing), then its runs are read: a
    verdict of the same pair committed meanwhile by another transaction is waited for and
    counted, so two verdicts of one pair at once cannot leave a row that lacks either."""
    pairs = sorted(set(pairs))
    if not pairs:
        return
    catalog = _catalog() if catalog is None else catalog
    insert = _insert(bind)
    keys = [TABLE.c.user, TABLE.c.cell_id]
    bind.execute(
        insert(TABLE).values([_empty(p) for p in pairs]).on_conflict_do_nothing(index_elements=keys)
    )
    for user, cell_id in pairs:
        bind.execute(
            select(TABLE.c.user)
            .where(TABLE.c.user == user, TABLE.c.cell_id == cell_id)
            .with_for_update()
        )
    rows = compute(bind, pairs, catalog)
    stmt = insert(TABLE)
    fields = [c.name for c in TABLE.c if c.name not in ("user", "cell_id")]
    stmt = stmt.on_conflict_do_update(
        index_elements=keys, set_={f: getattr(stmt.excluded, f) for f in fields}
    )
    bind.execute(stmt, [rows.get(p) or _empty(p) for p in pairs])


def refresh_owners(
    bind: Bind, owners: Iterable[str], catalog: Mapping[str, ProblemSpec] | None = None
) -> None:
    """Make every row of `owners` again (their runs moved to another owner)."""
    owners = sorted(set(owners))
    runs = select(Run.user, Run.cell_id).where(Run.user.in_(owners), Run.cell_id.is_not(None))
    had = select(TABLE.c.user, TABLE.c.cell_id).where(TABLE.c.user.in_(owners))
    pairs = {(u, c) for u, c in bind.execute(runs.distinct())}
    refresh(bind, pairs | {(u, c) for u, c in bind.execute(had)}, catalog)


def rebuild(bind: Bind, catalog: Mapping[str, ProblemSpec] | None = None) -> int:
    """Every row made again from the runs (the migration's backfill); how many there are."""
    catalog = _catalog() if catalog is None else catalog
    rows = list(compute(bind, None, catalog).values())
    bind.execute(delete(TABLE))
    for start in range(0, len(rows), 2000):
        bind.execute(TABLE.insert(), rows[start : start + 2000])
    return len(rows)


def _catalog() -> Mapping[str, ProblemSpec]:
    from kplay.kernels.catalog import load_catalog

    return load_catalog()


def _tier(problem: str, place: int, name: str, catalog: Mapping[str, ProblemSpec]) -> Tier:
    spec = catalog.get(problem)
    if spec is not None and place < len(spec.tiers) and spec.tiers[place].name == name:
        return spec.tiers[place]
    return Tier(name=name)


def among(bind: Bind, column: Any, values: list[str]) -> Any:
    """`column IN values`; on PostgreSQL as one array parameter (`= ANY(:values)`): a
    cohort's few hundred owners would otherwise be as many parameters, each rendered into
    the statement on each request."""
    if _dialect(bind) != "postgresql":
        return column.in_(values)
    return column == any_(bindparam(None, values, type_=ARRAY(String()), expanding=False))


def _scoped(bind: Bind, owners: list[str], exercises: list[str], pairs: list[Pair] | None) -> Any:
    """The cohort's rows, or those of `pairs` only (found by the table's primary key)."""
    if pairs is not None:
        return tuple_(TABLE.c.user, TABLE.c.cell_id).in_(pairs) & (TABLE.c.runs > 0)
    return among(bind, TABLE.c.user, owners) & TABLE.c.cell_id.in_(exercises) & (TABLE.c.runs > 0)


def read_failures(
    s: Session, owners: list[str], exercises: list[str], pairs: list[Pair] | None = None
) -> dict[Pair, dict[tuple[str, str | None], tuple[int, datetime]]]:
    """Each pair's failed runs by state and message: how many, and the latest one's time."""
    stmt = select(TABLE.c.user, TABLE.c.cell_id, TABLE.c.failures).where(
        _scoped(s, owners, exercises, pairs), TABLE.c.failed > 0
    )
    return {(user, cell_id): _failures(found) for user, cell_id, found in s.execute(stmt).all()}


def _failures(found: list[Any] | None) -> dict[tuple[str, str | None], tuple[int, datetime]]:
    return {
        (state, detail): (count, datetime.fromisoformat(latest))
        for state, detail, count, latest in found or ()
    }


def read_cells(
    s: Session,
    owners: list[str],
    exercises: list[str],
    catalog: Mapping[str, ProblemSpec],
    pairs: Iterable[Pair] | None = None,
    failures: bool = True,
) -> dict[Pair, Cell]:
    """The cells of the cohort's pairs (of `pairs` only, when given): the table's rows with
    the runs still going added (both reads see one snapshot when `snapshot` began the
    session): one read of the table, one of the runs still going. The failed runs by message
    are read with them unless `failures` is false (`read_failures` reads them apart)."""
    if not owners or not exercises:
        return {}
    pairs = None if pairs is None else list(pairs)
    wanted = None if pairs is None else set(pairs)
    c = TABLE.c
    # When its rank last rose: the first run that reached its tier, else its first done
    # run, else its first failed one.
    progressed = case(
        (c.tier_place.is_not(None), c.tier_at),
        (c.done > 0, c.first_done_at),
        else_=c.first_failed_at,
    )
    stmt = select(
        c.user, c.cell_id, c.runs, c.failed, c.done, c.first_at, c.last_at, c.changed_at,
        type_coerce(progressed, UTCDateTime()), c.best_us, c.tier_problem, c.tier_place,
        c.tier_name,
    ).where(_scoped(s, owners, exercises, pairs))  # fmt: skip
    if failures:  # in the same read
        stmt = stmt.add_columns(c.failures)
    cells: dict[Pair, Cell] = {}
    tiers: dict[tuple[str, int, str], Tier] = {}
    for row in s.execute(stmt).all():
        user, cell_id, runs, failed, done, first, last, changed, since, best = row[:10]
        if wanted is not None and (user, cell_id) not in wanted:
            continue
        rank = CORRECT if done else WRONG
        tier = None
        if row[11] is not None:
            key = row[10:13]
            tier = tiers.get(key) or tiers.setdefault(key, _tier(*key, catalog))
            rank = TIER
        cells[(user, cell_id)] = Cell(
            rank=rank, tier=tier, runs=runs, failed=failed, done=done, first_at=first,
            last_at=last, changed_at=changed, best_us=best, progressed_at=since,
        )  # fmt: skip
        if failures and failed > 0:
            cells[(user, cell_id)].failures = _failures(row[13])
    going = (
        select(
            Run.user,
            Run.cell_id,
            func.count(),
            func.min(Run.created_at),
            func.max(Run.created_at),
            func.max(Run.updated_at),
        )
        .where(Run.state.in_(NON_FINAL), Run.profile_of.is_(None))
        .group_by(Run.user, Run.cell_id)
    )
    if pairs is None:
        going = going.where(among(s, Run.user, owners), Run.cell_id.in_(exercises))
    else:  # on the index over runs(cell_id, user, created_at)
        going = going.where(tuple_(Run.cell_id, Run.user).in_([(c, u) for u, c in pairs]))
    for user, cell_id, n, first, last, changed in s.execute(going):
        pair = (user, cell_id)
        if wanted is not None and pair not in wanted:
            continue
        cell = cells.get(pair)
        if cell is None:
            cells[pair] = Cell(
                rank=RUNNING, runs=n, first_at=first, last_at=last, changed_at=changed,
                progressed_at=first,
            )  # fmt: skip
            continue
        cell.runs += n
        cell.first_at = min(cell.first_at or first, first)
        cell.last_at = max(cell.last_at or last, last)
        cell.changed_at = max(cell.changed_at, changed)
    return cells
