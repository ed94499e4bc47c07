"""Cohorts and assignments as services, on SQLite and PostgreSQL: making and joining a
cohort, rotating its code, the instructor rule of run visibility, assignments, hand-ins
(late ones too), grading on the assignment's secret seed, and a cohort's leaderboard."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from kplay.app.db.classroom import Assignment, Submission
from kplay.app.db.models import Run
from kplay.app.services import leaderboards
from kplay.app.services.access import Viewer, can_read
from kplay.app.services.accounts import Accounts, owner_key, viewer_of
from kplay.app.services.assignments import Assignments
from kplay.app.services.cohorts import CohortError, Cohorts, Teaching
from kplay.app.services.grading import verdict
from kplay.app.services.runs import RunRequest, RunService
from kplay.config import Settings
from kplay.kernels.models import RunState
from tests.app.conftest import TEST_SECRET_KEY
from tests.app.fakes import FakeExecutor, correct_result, wrong_result
from tests.app.test_accounts import GOOD, PASSWORD

EXERCISE = GOOD["cell"]


@dataclass
class Class:
    app: FastAPI
    executor: FakeExecutor
    runs: RunService
    cohorts: Cohorts
    work: Assignments
    people: dict[str, Viewer]

    def run(self, who: str, source: str = GOOD["source"]) -> Run:
        req = RunRequest(GOOD["problem"], GOOD["backend"], source, cell=EXERCISE)
        return self.runs.create(req, str(self.people[who]))

    def viewer(self, who: str) -> Viewer:
        """The viewer as a request makes it: an instructor's carries the teaching lookup."""
        found = self.people[who]
        if found.role == "instructor" and found.account_id is not None:
            found.teaching = Teaching(self.runs.db, found.account_id)
        return found


@pytest.fixture
def klass(database_url: str) -> Iterator[Class]:
    from kplay.app.main import create_app

    executor = FakeExecutor()
    settings = Settings(database_url=database_url, secret_key=TEST_SECRET_KEY)
    app = create_app(settings, executor)
    with TestClient(app):
        db = app.state.services.db
        accounts = Accounts(db)
        made = {
            "teacher": accounts.create("t@example.org", PASSWORD, "Teacher", role="instructor"),
            "other_teacher": accounts.create("o@example.org", PASSWORD, "Other", role="instructor"),
            "ada": accounts.create("ada@example.org", PASSWORD, "Ada"),
            "bob": accounts.create("bob@example.org", PASSWORD, "Bob"),
            "admin": accounts.create("a@example.org", PASSWORD, "Admin", role="admin"),
        }
        people = {who: viewer_of(u) for who, u in made.items()}
        runs = app.state.services.runs
        yield Class(app, executor, runs, Cohorts(db), Assignments(runs), people)


def _cohort_with(klass: Class, *learners: str) -> int:
    cohort = klass.cohorts.create(klass.viewer("teacher"), "  Spring   term ")
    for who in learners:
        assert klass.cohorts.join(klass.viewer(who), cohort.join_code or "").role == "learner"
    return cohort.id


def test_an_instructor_makes_a_cohort_and_learners_join_it(klass: Class) -> None:
    made = klass.cohorts.create(klass.viewer("teacher"), "  Spring   term ")
    assert made.name == "Spring term" and made.role == "instructor"
    code = made.join_code or ""
    assert len(code) >= 22 and made.join_path == f"/join/{code}"
    other = klass.cohorts.create(klass.viewer("teacher"), "Autumn")
    assert other.join_code != code
    joined = klass.cohorts.join(klass.viewer("ada"), code)
    assert joined.id == made.id and joined.join_code is None  # a learner never gets the code
    assert klass.cohorts.join(klass.viewer("ada"), code).role == "learner"  # twice: still one
    members = klass.cohorts.members(klass.viewer("teacher"), made.id)
    assert [(m.display_name, m.role) for m in members] == [
        ("Ada", "learner"),
        ("Teacher", "instructor"),
    ]
    assert [c.id for c in klass.cohorts.mine(klass.viewer("ada"))] == [made.id]
    assert {c.id for c in klass.cohorts.mine(klass.viewer("admin"))} == {made.id, other.id}
    assert klass.cohorts.peek(code) == "Spring term"


def test_only_instructors_make_cohorts_and_only_members_see_one(klass: Class) -> None:
    with pytest.raises(CohortError) as refused:
        klass.cohorts.create(klass.viewer("ada"), "Mine")
    assert refused.value.status == 403 and "instructor" in refused.value.message
    with pytest.raises(CohortError) as anonymous:
        klass.cohorts.create(Viewer("reader-1"), "Mine")
    assert anonymous.value.status == 401
    with pytest.raises(CohortError) as empty:
        klass.cohorts.create(klass.viewer("teacher"), "   ")
    assert empty.value.status == 422 and "name" in empty.value.message
    cohort = _cohort_with(klass, "ada")
    for who in ("bob", "other_teacher"):
        with pytest.raises(CohortError) as hidden:
            klass.cohorts.view(klass.viewer(who), cohort)
        assert hidden.value.status == 404 and f"no cohort {cohort}" in hidden.value.message
    with pytest.raises(CohortError) as learner:
        klass.cohorts.members(klass.viewer("ada"), cohort)
    assert learner.value.status == 403
    assert klass.cohorts.view(klass.viewer("admin"), cohort).teaching


def test_rotating_the_code_retires_the_old_link(klass: Class) -> None:
    cohort = klass.cohorts.create(klass.viewer("teacher"), "Spring")
    old = cohort.join_code or ""
    new = klass.cohorts.rotate(klass.viewer("teacher"), cohort.id).join_code or ""
    assert new and new != old
    with pytest.raises(CohortError) as gone:
        klass.cohorts.join(klass.viewer("ada"), old)
    assert gone.value.status == 404 and "join code" in gone.value.message
    assert klass.cohorts.join(klass.viewer("ada"), new).id == cohort.id
    with pytest.raises(CohortError) as learner:
        klass.cohorts.rotate(klass.viewer("ada"), cohort.id)
    assert learner.value.status == 403
    for bad in ("", "x" * 33, "a b", "code\x00"):
        with pytest.raises(CohortError):
            klass.cohorts.join(klass.viewer("bob"), bad)


def test_an_instructor_reads_their_learners_runs_and_no_one_elses(klass: Class) -> None:
    cohort = _cohort_with(klass, "ada")
    ada_run, bob_run = klass.run("ada"), klass.run("bob")
    teacher, other = klass.viewer("teacher"), klass.viewer("other_teacher")
    assert can_read(ada_run, teacher)
    assert not can_read(bob_run, teacher)  # not in the cohort
    assert not can_read(ada_run, other)  # teaches no cohort of Ada's
    assert not can_read(ada_run, klass.viewer("bob"))  # a learner never reads another's
    assert klass.runs.visible(ada_run.id, teacher).id == ada_run.id
    # A fellow instructor member is no learner: a teacher's own runs stay their own.
    klass.cohorts.join(other, klass.cohorts.view(teacher, cohort).join_code or "")
    teacher_run = klass.run("teacher")
    assert can_read(teacher_run, teacher) and not can_read(teacher_run, klass.viewer("ada"))
    assert not Teaching(klass.runs.db, teacher.account_id or 0)("reader-anonymous")


def test_the_teaching_lookup_asks_once_per_owner(klass: Class) -> None:
    _cohort_with(klass, "ada")
    lookup = Teaching(klass.runs.db, klass.people["teacher"].account_id or 0)
    queries: list[str] = []
    from sqlalchemy import event

    def count(*args: object) -> None:
        queries.append(str(args[2]))

    engine = klass.runs.db.engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        for _ in range(5):
            assert lookup(str(klass.people["ada"]))
            assert not lookup(str(klass.people["bob"]))
    finally:
        event.remove(engine, "before_cursor_execute", count)
    selects = [q for q in queries if q.lstrip().upper().startswith("SELECT")]
    assert len(selects) == 2, selects


def _assignment(klass: Class, cohort: int, **kw: object) -> int:
    values: dict[str, object] = {
        "title": "Week 1",
        "exercises": [EXERCISE],
        "deadline": datetime.now(UTC) + timedelta(days=7),
    }
    values.update(kw)
    return klass.work.create(klass.viewer("teacher"), cohort, **values).id  # type: ignore[arg-type]


def test_assignments_are_checked_and_keep_their_seed_secret(klass: Class) -> None:
    cohort = _cohort_with(klass, "ada")
    teacher = klass.viewer("teacher")
    made = klass.work.create(
        teacher, cohort, "Week 1", [EXERCISE, EXERCISE], "2031-05-01T18:00", "H100", True
    )
    assert made.exercises == [EXERCISE] and made.device_kind == "H100" and made.hidden_cases
    assert made.deadline == datetime(2031, 5, 1, 18, 0, tzinfo=UTC)
    with klass.runs.db.session() as s:
        seed = s.get(Assignment, made.id).hidden_seed  # type: ignore[union-attr]
    assert seed is not None and 0 < seed < 2**63
    assert str(seed) not in repr(made.public()) and "seed" not in made.public()
    cases = [
        ({"title": ""}, "title"),
        ({"exercises": []}, "at least one exercise"),
        ({"exercises": ["no-such-cell"]}, "no exercise 'no-such-cell'"),
        ({"deadline": "next friday"}, "not a date"),
        ({"device_kind": "H100; rm -rf"}, "device kind"),
    ]
    for change, words in cases:
        with pytest.raises(CohortError) as bad:
            _assignment(klass, cohort, **change)
        assert bad.value.status == 422 and words in bad.value.message
    with pytest.raises(CohortError) as learner:
        klass.work.create(klass.viewer("ada"), cohort, "Mine", [EXERCISE], "2031-01-01")
    assert learner.value.status == 403
    with pytest.raises(CohortError) as outsider:
        klass.work.of_cohort(klass.viewer("bob"), cohort)
    assert outsider.value.status == 404
    assert [a.id for a in klass.work.of_cohort(klass.viewer("ada"), cohort)] == [made.id]


def test_a_hand_in_is_graded_again_on_the_secret_seed(klass: Class) -> None:
    cohort = _cohort_with(klass, "ada", "bob")
    aid = _assignment(klass, cohort, device_kind="H100", hidden_seed=True)
    run = klass.run("ada")
    done = klass.work.submit(klass.viewer("ada"), aid, EXERCISE, run.id)
    job = klass.executor.jobs[-1]
    with klass.runs.db.session() as s:
        seed = s.get(Assignment, aid).hidden_seed  # type: ignore[union-attr]
        grading = s.get(Run, done.graded_run_id)
    assert job.secret_seed == seed and not job.public_seeds and job.device == "H100"
    assert job.source == run.source and job.user == owner_key(klass.people["ada"].account_id)
    assert grading is not None and grading.user == run.user and grading.cell_id is None
    # The fake executor finished it at once, correct: graded, with its share of the roofline.
    assert done.state == "graded" and not done.late
    assert done.score == round(grading.result["roofline"]["percent_of_roofline"], 1)
    assert [r.id for r in klass.runs.history(EXERCISE, run.user)] == [run.id]
    # Bob sees his own hand-ins only (none); the teacher sees Ada's.
    assert klass.work.submissions(klass.viewer("bob"), aid) == []
    assert [s.learner for s in klass.work.submissions(klass.viewer("teacher"), aid)] == ["Ada"]


def test_hand_ins_are_refused_with_reasons(klass: Class) -> None:
    cohort = _cohort_with(klass, "ada", "bob")
    aid = _assignment(klass, cohort)
    ada = klass.viewer("ada")
    bobs = klass.run("bob")
    with pytest.raises(CohortError) as not_yours:
        klass.work.submit(ada, aid, EXERCISE, bobs.id)
    assert not_yours.value.status == 404 and "of yours" in not_yours.value.message
    with pytest.raises(CohortError) as other_exercise:
        klass.work.submit(ada, aid, "ch01-vadd-cuda", klass.run("ada").id)
    assert other_exercise.value.status == 422 and "not part of" in other_exercise.value.message
    with pytest.raises(CohortError) as teacher:
        klass.work.submit(klass.viewer("teacher"), aid, EXERCISE, klass.run("teacher").id)
    assert teacher.value.status == 403
    with pytest.raises(CohortError) as outsider:
        klass.work.submit(klass.viewer("other_teacher"), aid, EXERCISE, bobs.id)
    assert outsider.value.status == 404 and "no assignment" in outsider.value.message
    klass.executor.hold = True
    unfinished = klass.run("ada")
    with pytest.raises(CohortError) as running:
        klass.work.submit(ada, aid, EXERCISE, unfinished.id)
    assert running.value.status == 409 and "not finished" in running.value.message


def test_late_work_is_kept_and_marked_and_a_wrong_one_fails(klass: Class) -> None:
    cohort = _cohort_with(klass, "ada")
    aid = _assignment(klass, cohort, deadline=datetime.now(UTC) - timedelta(minutes=1))
    run = klass.run("ada")
    klass.executor.script = wrong_result
    late = klass.work.submit(klass.viewer("ada"), aid, EXERCISE, run.id)
    assert late.late and late.state == "failed" and late.score is None
    with klass.runs.db.session() as s:
        stored = s.get(Submission, late.id)
    assert stored is not None and stored.late and stored.state == "failed"


def test_a_pending_submission_follows_its_grading_run(klass: Class) -> None:
    cohort = _cohort_with(klass, "ada")
    aid = _assignment(klass, cohort)
    run = klass.run("ada")
    klass.executor.hold = True
    pending = klass.work.submit(klass.viewer("ada"), aid, EXERCISE, run.id)
    assert pending.state == "pending" and pending.run_state == "queued"
    assert klass.work.submissions(klass.viewer("ada"), aid)[0].state == "pending"
    klass.executor.release(pending.graded_run_id)
    (settled,) = klass.work.submissions(klass.viewer("ada"), aid)
    assert settled.state == "graded" and settled.score is not None and settled.score > 0
    latest = klass.work.status([settled])
    assert latest[EXERCISE].id == pending.id


def test_verdicts_make_states_and_scores() -> None:
    from kplay.kernels.models import RunJob

    job = RunJob(problem="vector_add", backend="numba-cpu", source="x")
    good = correct_result(job).model_dump(mode="json")
    wrong = wrong_result(job).model_dump(mode="json")
    assert verdict(Run(state="done", result=good)) == (
        "graded",
        round(good["roofline"]["percent_of_roofline"], 1),
    )
    untimed = {**good, "roofline": None}
    assert verdict(Run(state="done", result=untimed)) == ("graded", None)
    assert verdict(Run(state="wrong", result=wrong)) == ("failed", None)
    assert verdict(Run(state=RunState.suspicious.value, result=good)) == ("failed", None)
    assert verdict(Run(state="runtime_error", result=None)) == ("failed", None)


def test_a_cohorts_board_holds_its_members_only(
    klass: Class, make_settings: Callable[..., Settings]
) -> None:
    cohort = _cohort_with(klass, "ada")
    klass.executor.script = lambda job: _verified(correct_result(job, 90.0))
    klass.run("ada")
    klass.executor.script = lambda job: _verified(correct_result(job, 50.0))
    klass.run("bob")
    problem = klass.runs.catalog["vector_add"]
    key = b"k" * 32
    everyone = leaderboards.leaderboard(klass.runs.db, problem, key, "x")
    assert len(everyone.rows) == 2
    members = klass.cohorts.member_owners(cohort)
    board = leaderboards.leaderboard(klass.runs.db, problem, key, "x", owners=members)
    assert [r.median_us for r in board.rows] == [90.0]


def _verified(result: object) -> object:
    result.verified = True  # type: ignore[attr-defined]
    return result


def test_a_typed_join_address_lands_on_the_cohorts_page(klass: Class) -> None:
    with TestClient(klass.app) as client:
        answer = client.get("/cohorts/join", follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/cohorts"
