"""The tier line on the run card (at its edges: no tiers, the top tier, a bar just missed,
untimed runs), and the reader's progress page and JSON: state and tier per exercise, attempts,
kernel times, time spent in working sessions, and only the reader's own runs."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from kplay.app.book import Book
from kplay.app.db.migrate import upgrade
from kplay.app.db.session import Database
from kplay.app.main import create_app
from kplay.app.services.progress import Outcome
from kplay.app.services.progressview import Attempt, progress_page, sessions
from kplay.app.services.tiers import tier_line
from kplay.config import Settings
from kplay.kernels.catalog import load_catalog
from kplay.kernels.models import RunJob, RunResult, RunState, TimingStage
from tests.app.fakes import FakeExecutor, correct_result, wrong_result
from tests.app.storedruns import at, job, store, verified, wrong

CATALOG = load_catalog()
VADD = CATALOG["vector_add"]
CELL = "ch01-vadd-cpu"
# vector_add's tiers: bronze 50 %, silver 75 %, gold 90 % of the roofline; the fake's case
# puts a median of 55 µs at 91.5 %, 80 µs at 62.9 % and 200 µs at 25.1 %.
GOLD_US, BRONZE_US, UNTIERED_US = 55.0, 80.0, 200.0


def timed(median_us: float) -> RunResult:
    return correct_result(job(), median_us)


def at_percent(percent: float) -> RunResult:
    result = timed(100.0)
    assert result.roofline is not None
    result.roofline = result.roofline.model_copy(update={"percent_of_roofline": percent})
    return result


# ---------------------------------------------------------------- the tier line


def test_the_top_tier_reached_says_so_with_its_bar() -> None:
    line = tier_line(VADD, timed(GOLD_US))
    assert line is not None and (line.key, line.tier) == ("reached", "gold")
    assert line.text == "gold reached: 91.5% of the memory roof (gold from 90%). The top tier."


def test_a_tier_reached_names_the_next_and_what_it_needs() -> None:
    line = tier_line(VADD, timed(BRONZE_US))
    assert line is not None and (line.key, line.tier) == ("next", "bronze")
    assert line.text == (
        "bronze reached: 62.9% of the memory roof (bronze from 50%). "
        "Next, silver: 75% of the memory roof needed — you are at 62.9%."
    )
    below = tier_line(VADD, timed(UNTIERED_US))
    assert below is not None and below.tier is None
    assert below.text == "No tier yet. bronze: 50% of the memory roof needed — you are at 25.1%."


def test_just_below_a_bar_never_reads_as_the_bar() -> None:
    short = tier_line(VADD, at_percent(74.96))
    assert short is not None and short.tier == "bronze"
    assert "you are at 74.9%" in short.text and "75.0%" not in short.text
    exact = tier_line(VADD, at_percent(75.0))
    assert exact is not None and exact.tier == "silver"
    assert exact.text.startswith("silver reached: 75.0% of the memory roof (silver from 75%)")


def test_a_baseline_tier_is_worded_against_the_baseline() -> None:
    attention = CATALOG["attention_fwd"]  # bronze 10 %, silver 60 %, gold 90 % of the baseline
    result = correct_result(RunJob(problem="attention_fwd", backend="triton", source="x"))
    assert result.roofline is not None and attention.baseline is not None
    result.roofline = result.roofline.model_copy(update={"speedup_over_baseline": 0.399})
    line = tier_line(attention, result)
    name = attention.baseline.name
    assert line is not None and line.tier == "bronze"
    assert f"Next, silver: 60% of the speed of {name} needed — you are at 39.9%." in line.text
    result.roofline = result.roofline.model_copy(update={"speedup_over_baseline": None})
    none = tier_line(attention, result)
    assert none is not None and none.tier is None and "you are at no baseline time" in none.text


def test_a_problem_without_tiers_says_a_correct_run_is_the_goal() -> None:
    bare = VADD.model_copy(update={"tiers": []})
    line = tier_line(bare, timed(GOLD_US))
    assert line is not None and line.key == "untiered" and line.tier is None
    assert tier_line(None, timed(GOLD_US)) == line


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ("simulated", "a simulated run is not timed; tiers are measured on real hardware"),
        ("untimed", "the run was not timed (timing was switched off)."),
        ("compiled", "compiled, not run, so nothing was checked or timed"),
        ("suspicious", "faster than the device allows"),
        ("no roofline", "timed but not placed on the roofline"),
    ],
)
def test_a_run_that_cannot_be_placed_says_why(change: str, says: str) -> None:
    result = timed(GOLD_US)
    if change == "simulated":
        result.timing = TimingStage(timed=False)
        result.system = result.system.model_copy(update={"kind": "simulator"})  # type: ignore[union-attr]
    elif change == "untimed":
        result.timing = TimingStage(timed=False, untimed_reason="timing was switched off.")
    elif change == "compiled":
        result.state, result.check, result.timing = RunState.compiled, None, None
    elif change == "suspicious":
        result.state = RunState.suspicious
    else:
        result.roofline = None
    line = tier_line(VADD, result)
    assert line is not None and line.key == "none" and line.tier is None
    assert line.text.startswith("No tier: ") and says in line.text


def test_a_failed_run_has_no_tier_line() -> None:
    assert tier_line(VADD, wrong_result(job())) is None
    assert tier_line(VADD, None) is None


# ---------------------------------------------------------------- pages


def _run(client: TestClient, cell: str = CELL, backend: str = "numba-cpu") -> str:
    body = {"problem": "vector_add", "backend": backend, "source": "def k(): pass\n", "cell": cell}
    made = client.post("/api/v1/runs", json=body)
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def _row(html: str, key: str) -> str:
    found = re.search(rf'<tr data-exercise="{re.escape(key)}".*?</tr>', html, re.S)
    assert found, f"/progress has no row {key}"
    return found.group(0)


def test_the_card_shows_the_tier_and_a_wrong_run_after_keeps_it(
    client: TestClient, executor: FakeExecutor
) -> None:
    executor.script = lambda j: correct_result(j, BRONZE_US)
    first = _run(client)
    card = client.get(f"/runs/{first}/card").text
    assert 'data-tier-line="next" data-tier="bronze"' in card
    assert "Next, silver: 75% of the memory roof needed — you are at 62.9%." in card
    executor.script = wrong_result
    second = _run(client)
    assert "data-tier-line" not in client.get(f"/runs/{second}/card").text
    row = _row(client.get("/progress").text, CELL)
    assert 'data-state="tier" data-tier="bronze"' in row and 'data-attempts="2"' in row
    assert "80.0 µs" in row  # first and best kernel time: the correct run's
    mine = client.get("/api/v1/progress").json()
    [vadd] = [
        e for p in mine["parts"] for c in p["chapters"] for e in c["exercises"] if e["key"] == CELL
    ]
    assert (vadd["state"], vadd["tier"], vadd["attempts"]) == ("tier", "bronze", 2)
    assert vadd["best_time_us"] == BRONZE_US == vadd["first_time_us"]
    assert mine["attempts"] == 2 and mine["solved"] == 1


def test_progress_shows_only_the_readers_own_runs(app: object, executor: FakeExecutor) -> None:
    with TestClient(app) as mine, TestClient(app) as other:  # type: ignore[arg-type]
        executor.script = lambda j: correct_result(j, GOLD_US)
        _run(mine)
        theirs = other.get("/progress")
        their_json = other.get("/api/v1/progress").json()
        own = mine.get("/progress").text
    assert 'data-attempts="1"' in _row(own, CELL) and 'data-tier="gold"' in _row(own, CELL)
    assert 'data-attempts="0"' in _row(theirs.text, CELL)
    assert 'data-state="untried"' in _row(theirs.text, CELL)
    assert their_json["attempts"] == 0 and their_json["elsewhere"] == []
    assert "You have not run anything yet" in theirs.text


def test_the_nav_links_progress_and_the_page_says_how_time_is_counted(client: TestClient) -> None:
    home = client.get("/").text
    assert '<a href="/progress">Progress</a>' in home
    page = client.get("/progress").text
    assert "no more than 30 minutes apart make one session" in page
    assert client.get("/api/v1/progress").json()["session_gap_s"] == 1800


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    found = Database(database_url)
    upgrade(found.engine)
    yield found
    found.dispose()


def test_time_spent_is_split_into_sessions_at_gaps_over_30_minutes(db: Database) -> None:
    took = timedelta(seconds=20)
    for minute, result in (
        (0, wrong(job())),
        (10, verified(job(), 70.0)),
        (25, wrong(job())),  # 15 min after the last: the same session, 0 to 25 min 20 s
        (70, verified(job(), 60.0)),  # 45 min after: a new session
        (95, verified(job(), 65.0)),  # 25 min after: the same, 70 to 95 min 20 s
    ):
        store(db, "reader-a", result, at(minute), cell=CELL, took=took)
    store(db, "reader-a", verified(job(problem="saxpy"), 90.0), at(200))  # API, no cell
    store(db, "reader-b", verified(job(), 10.0), at(30), cell=CELL)
    settings = Settings(database_url=db.url)
    book = Book(settings.book_dir, CATALOG, settings.results_dir)
    page = progress_page(book, CATALOG, db, "reader-a")
    [row] = [r for r in page.rows if r.key == CELL]
    assert (row.attempts, row.sessions) == (5, 2)
    assert row.spent == timedelta(minutes=50, seconds=40)
    assert (row.first_us, row.best_us, row.best_at) == (70.0, 60.0, at(70))
    assert row.first_at == at(0) and row.last_at == at(95)
    assert row.progress.tier is not None and row.progress.tier.name == "silver"
    assert row.spent_text == "50 min"
    [api_run] = page.elsewhere
    assert (api_run.key, api_run.attempts, api_run.sessions) == ("saxpy", 1, 1)
    assert api_run.spent == took and api_run.spent_text == "under a minute"
    assert page.attempts == 6 and page.solved == 2


def test_no_runs_make_no_session_and_a_gap_of_exactly_30_minutes_does_not_split() -> None:
    assert sessions([]) == (0, timedelta())
    outcome = Outcome(CELL, "vector_add", "wrong", False, None, None)

    def run(start: float, end: float) -> Attempt:
        return Attempt(outcome, "cuda", at(start), at(end), None, None)

    assert sessions([run(0, 1), run(31, 32)]) == (1, timedelta(minutes=32))
    assert sessions([run(0, 1), run(31.5, 32)]) == (2, timedelta(minutes=1.5))
    # A run still in flight (no finish yet) ends its session at its submission.
    assert sessions([Attempt(outcome, "cuda", at(5), None, None, None)]) == (1, timedelta())


def test_progress_page_reads_the_runs_in_one_query(
    make_settings: Callable[..., Settings], executor: FakeExecutor
) -> None:
    from sqlalchemy import event

    app = create_app(make_settings(), executor)
    with TestClient(app) as client:
        _run(client)
        client.get("/progress")
        seen: list[str] = []

        @event.listens_for(app.state.services.db.engine, "before_cursor_execute")
        def _watch(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
            # The reader's runs; the app may look for unfinished ones on its own meanwhile.
            if re.search(r'\bruns\.(user|"user") =', statement):
                seen.append(statement)

        client.get("/progress")
    assert len(seen) == 1, seen
