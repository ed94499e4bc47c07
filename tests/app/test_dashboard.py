"""The cohort dashboard's service: heatmap cells from stored runs, the failures grouped by
message, who is stuck, best times, updates since a cursor, and the gradebook's CSV (quoting,
formula cells, late flags), on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime, timedelta
from functools import lru_cache

from kplay.app.book import Book
from kplay.app.db.classroom import Assignment, Cohort, CohortMember, Submission
from kplay.app.db.migrate import upgrade
from kplay.app.db.session import Database
from kplay.app.services import dashboard_learner as learner_view
from kplay.app.services import dashboard_view as view
from kplay.app.services.accounts import Accounts, owner_key
from kplay.app.services.dashboard import Dashboards, normalise
from kplay.app.services.dashboard_roster import roster
from kplay.config import Settings
from kplay.kernels.catalog import load_catalog
from kplay.kernels.models import RunJob
from tests.app.fakes import compile_error_result, correct_result, wrong_result
from tests.app.storedruns import T0, at, store, verified

VADD, SAXPY = "ch01-vadd-cpu", "ch01-saxpy-cpu"
CATALOG = load_catalog()
PASSWORD = "a password long enough"


def make_cohort(db: Database, learners: list[str], instructor: str = "teach") -> dict[str, int]:
    """A cohort with one instructor, these learners and one assignment of two exercises;
    returns the accounts' ids by name, and the cohort's as 'cohort'."""
    accounts = Accounts(db)
    ids = {
        name: accounts.create(
            f"{re.sub('[^a-z0-9]', '', name.lower())}@example.org", PASSWORD, name
        ).id
        for name in [instructor, *learners]
    }
    with db.session() as s:
        cohort = Cohort(
            name="Kernels 101", join_code=f"J{ids[instructor]}", created_by=ids[instructor]
        )
        s.add(cohort)
        s.flush()
        s.add(CohortMember(cohort_id=cohort.id, user_id=ids[instructor], role="instructor"))
        for name in learners:
            s.add(CohortMember(cohort_id=cohort.id, user_id=ids[name], role="learner"))
        s.add(
            Assignment(
                cohort_id=cohort.id,
                title="Week 1",
                exercises=[VADD, SAXPY],
                deadline=T0 + timedelta(days=7),
            )
        )
        s.flush()
        ids["cohort"] = cohort.id
    return ids


def job(cell: str) -> RunJob:
    problem = "vector_add" if cell == VADD else "saxpy"
    return RunJob(problem=problem, backend="numba-cpu", source="x = 1\n", cell=cell)


def test_cells_failures_stuck_times_and_updates(database_url: str) -> None:
    db = Database(database_url)
    try:
        upgrade(db.engine)
        ids = make_cohort(db, ["ana", "bo", "cy"])
        ana, bo, cy = (owner_key(ids[n]) for n in ("ana", "bo", "cy"))
        # ana: wrong, then verified at 60 µs on vector_add (84% of the roof: silver).
        store(db, ana, wrong_result(job(VADD)), at(0), cell=VADD)
        store(db, ana, verified(job(VADD), 60.0), at(5), cell=VADD)
        # bo: six wrong attempts on vector_add, long ago; nothing else.
        for i in range(6):
            store(db, bo, wrong_result(job(VADD)), at(i), cell=VADD)
        # cy: a compile error on saxpy, and a correct run at 200 µs of vector_add (no tier).
        store(db, cy, compile_error_result(job(SAXPY)), at(1), cell=SAXPY)
        store(db, cy, correct_result(job(VADD), 200.0), at(2), cell=VADD)
        # A run outside the cohort's exercises counts nowhere.
        store(db, cy, wrong_result(job(VADD)), at(3), cell="ch03-triad-exercise")

        found = roster(db, ids["cohort"])
        assert [x.name for x in found.learners] == ["ana", "bo", "cy"]
        assert found.instructors == {ids["teach"]} and found.exercises == (VADD, SAXPY)
        boards = Dashboards()
        state = boards.state(db, found, CATALOG, wait=True)
        assert state.failures_ready
        shown = view.exercises(_book(), found.exercises)
        rows = {r.learner.name: r for r in view.heatmap(found, state, shown)}
        assert _cells(rows["ana"].cells) == [("tier", "silver", "S"), ("untried", "", "·")]
        assert _cells(rows["bo"].cells) == [("wrong", "", "✗6"), ("untried", "", "·")]
        assert _cells(rows["cy"].cells) == [("correct", "", "✓"), ("wrong", "", "✗1")]
        assert f'id="c{ids["bo"]}-0"' in rows["bo"].cells
        assert 'title="not correct yet (6 runs, 6 failed)"' in rows["bo"].cells
        assert [r.solved for r in rows.values()] == [1, 0, 1]

        groups = view.clusters(state)
        assert [(c.state, c.pattern, c.count, c.learners) for c in groups] == [
            ("wrong", "# of # cases differ from the reference", 7, 2),
            ("compile_error", "the kernel did not compile", 1, 1),
        ]
        assert groups[0].example == "1 of 2 cases differ from the reference"

        now = datetime.now(UTC)
        stuck = view.stuck(found, state, shown, now)
        assert [(s.learner.name, s.exercise.id, s.failed) for s in stuck] == [("bo", VADD, 6)]
        assert view.stuck(found, state, shown, now, fails=7) == []
        assert view.stuck(found, state, shown, T0 + timedelta(minutes=10), minutes=20) == []

        vadd_times = view.times(found, state, shown)[0]
        assert vadd_times.count == 2 and vadd_times.p50 == 130.0
        assert sum(b.count for b in vadd_times.bars) == 2
        assert view.times(found, state, shown)[1].count == 0

        tally = view.tally(found, state, {e.id: e for e in shown})
        assert (tally.learners, tally.exercises, tally.runs, tally.solved_cells) == (3, 2, 10, 2)

        # A new run: the next read asks for changes only, and only its cell has changed.
        cursor, asked = state.cursor, datetime.now(UTC)
        # Read in full, then the failures: cells seen by then are not sent again ...
        assert view.changed_cells(found, state, shown, asked) == []
        failing = {(c.id, c.key) for c in view.changed_cells(found, state, shown, cursor)}
        # ... but those the second read (failures by message) changed are.
        assert failing == {
            (f"c{ids['ana']}-0", "tier"),
            (f"c{ids['bo']}-0", "wrong"),
            (f"c{ids['cy']}-1", "wrong"),
        }
        later = datetime.now(UTC) + timedelta(seconds=1)
        store(db, bo, verified(job(SAXPY), 50.0), later, cell=SAXPY)
        again = boards.state(db, found, CATALOG)
        assert again is state and state.cursor > cursor
        changed = view.changed_cells(found, state, shown, asked)
        assert [(c.id, c.key) for c in changed] == [(f"c{ids['bo']}-1", "tier")]
        assert view.changed_cells(found, state, shown, datetime.now(UTC)) == []

        # A learner who joins starts the state afresh.
        with db.session() as s:
            dee = Accounts(db).create("dee@example.org", PASSWORD, "dee").id
            s.add(CohortMember(cohort_id=ids["cohort"], user_id=dee, role="learner"))
        assert boards.state(db, roster(db, ids["cohort"]), CATALOG) is not state
    finally:
        db.dispose()


def test_messages_lose_what_varies() -> None:
    assert normalise("3 of 12 cases differ (max error 1.5e-03)") == (
        "# of # cases differ (max error #)"
    )
    assert normalise("name 'tmp_17' is not defined") == "name '…' is not defined"
    assert normalise('kernel.cu(3): error: "x" undefined') == ("kernel.cu(#): error: '…' undefined")
    assert normalise("segfault at 0x7ffe12ab in /tmp/job-4/kernel.so") == (
        "segfault at # in <path>"
    )
    assert normalise("  timed  out\nafter 30 s ") == "timed out after # s"
    assert normalise("float32 expected") == "float32 expected"  # names keep their digits


def test_percentiles_and_histogram() -> None:
    assert view.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert view.percentile([7.0], 90) == 7.0
    bars = view.histogram([1.0, 10.0, 100.0, 1000.0], bins=3)
    assert [b.count for b in bars] == [1, 1, 2]
    assert bars[-1].h == view.HIST_H and bars[0].h == view.HIST_H // 2
    assert view.histogram([5.0, 5.0])[0].count == 2


def test_gradebook_quotes_cells_and_defuses_formulas(database_url: str) -> None:
    db = Database(database_url)
    try:
        upgrade(db.engine)
        ids = make_cohort(db, ["=cmd|' /C calc'!A0", 'Lee, "the" Third', "+1 caller"])
        evil, lee = (owner_key(ids[n]) for n in ("=cmd|' /C calc'!A0", 'Lee, "the" Third'))
        run_id = store(db, evil, verified(job(VADD), 60.0), at(0), cell=VADD)
        store(db, lee, wrong_result(job(SAXPY)), at(1), cell=SAXPY)
        found = roster(db, ids["cohort"])
        with db.session() as s:
            s.add_all(
                [
                    Submission(assignment_id=found.assignments[0].id, user_id=ids[name],
                               exercise=VADD, run_id=run_id, late=late, state="graded", score=score)
                    for name, late, score in [
                        ("=cmd|' /C calc'!A0", False, 0.5),
                        ("=cmd|' /C calc'!A0", True, 0.75),
                    ]
                ]
            )  # fmt: skip
        state = Dashboards().state(db, found, CATALOG, wait=True)
        shown = view.exercises(_book(), found.exercises)
        text = learner_view.gradebook_csv(found, state, shown, learner_view.grades(db, found))
        rows = list(csv.reader(io.StringIO(text)))
        head = ["learner", "email"] + [f"{VADD} {w}" for w in ("state", "tier", "score", "late")]
        assert rows[0][:6] == head
        by_name = {r[0]: r for r in rows[1:]}
        assert set(by_name) == {"'+1 caller", "'=cmd|' /C calc'!A0", 'Lee, "the" Third'}
        assert by_name["'=cmd|' /C calc'!A0"][2:6] == ["tier", "silver", "0.75", "yes"]
        assert by_name['Lee, "the" Third'][2:10] == ["untried", "", "", "", "wrong", "", "", ""]
        assert '"Lee, ""the"" Third"' in text  # quoted, its quotes doubled
        assert learner_view.safe_cell("-2") == "'-2" and learner_view.safe_cell("@x") == "'@x"
        assert learner_view.safe_cell("plain") == "plain" and learner_view.safe_cell(None) == ""
    finally:
        db.dispose()


def test_diffs_between_attempts() -> None:
    lines, cut = learner_view.source_diff("a = 1\nb = 2\n", "a = 1\nb = 3\n")
    assert [(d.kind, d.text) for d in lines] == [
        ("hunk", "@@ -1,2 +1,2 @@"),
        ("same", " a = 1"),
        ("del", "-b = 2"),
        ("add", "+b = 3"),
    ]
    assert not cut
    many = "\n".join(str(i) for i in range(500))
    lines, cut = learner_view.source_diff(many, "", limit=50)
    assert cut and len(lines) == 50
    assert learner_view.source_diff("same\n", "same\n") == ([], False)


CELL = re.compile(r'data-state="(\w+)"(?: data-tier="(\w+)")?[^>]*>([^<]*)</td>')


def _cells(html: str) -> list[tuple[str, str, str]]:
    """(state, tier, text) of each cell of a heatmap row's HTML."""
    return [(m.group(1), m.group(2) or "", m.group(3)) for m in CELL.finditer(html)]


@lru_cache(maxsize=1)
def _book() -> Book:
    settings = Settings(secret_key="test-only-session-key-0123456789abcdef")
    book = Book(settings.book_dir, CATALOG, settings.results_dir)
    book.index()
    return book
