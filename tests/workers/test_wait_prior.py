"""The wait estimate's prior: durations an earlier server kept, read until a restarted one
has its own; and the first job of each fresh child, left out of the durations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kplay.app.executors import durations_file
from kplay.workers.local import LocalExecutor, kind_of
from kplay.workers.waits import MIN_SAMPLES, Durations, load, save, start_in_s
from tests.workers.celery_support import job
from tests.workers.test_local_executor import LIMITS, Sink

OK = "tests.workers.jobfuncs:ok"
FULL = ("vector_add", "numba-cpu", "full")
CHECK = ("vector_add", "numba-cpu", "check")
OTHER = ("saxpy", "numba-cpu", "full")


def test_the_prior_counts_beside_this_servers_own_until_they_push_it_out() -> None:
    earlier = Durations()
    for _ in range(MIN_SAMPLES):
        earlier.add(FULL, 8.0)
    d = Durations(kept=10, prior=earlier)
    assert d.samples(FULL) == [8.0] * MIN_SAMPLES
    assert start_in_s([], [FULL, FULL], 1, d.samples) == pytest.approx(16.0)
    for _ in range(MIN_SAMPLES):
        d.add(FULL, 2.0)
    # Older than this server's own, and still counted: five of its own are a short record.
    assert d.samples(FULL) == [8.0] * MIN_SAMPLES + [2.0] * MIN_SAMPLES
    d.add(FULL, 2.0)
    assert d.samples(FULL) == [8.0] * (MIN_SAMPLES - 1) + [2.0] * (MIN_SAMPLES + 1)
    for _ in range(10):
        d.add(FULL, 2.0)
    assert d.samples(FULL) == [2.0] * 10


def test_a_kind_the_prior_knows_beats_this_servers_other_kinds() -> None:
    earlier = Durations()
    for _ in range(MIN_SAMPLES):
        earlier.add(OTHER, 20.0)
    d = Durations(prior=earlier)
    for _ in range(MIN_SAMPLES):
        d.add(FULL, 2.0)
    # saxpy: none of this server's own, but the prior knows its kind.
    assert d.samples(OTHER) == [20.0] * MIN_SAMPLES
    # A kind neither knows: its backend's durations, the prior's then this server's.
    both = [20.0] * MIN_SAMPLES + [2.0] * MIN_SAMPLES
    assert d.samples(("sum", "numba-cpu", "full")) == both
    # The mode counts: a check-only run of a known problem goes by every job (no check run
    # yet on the backend), not by the full runs of its problem.
    assert d.samples(CHECK) == both


def test_saved_durations_come_back_in_order_and_carry_the_prior(tmp_path: Path) -> None:
    path = tmp_path / "data" / "kplay.sqlite3-waits.json"
    first = Durations()
    for seconds in (1.0, 2.0, 3.0):
        first.add(FULL, seconds)
    first.add(("x", "cuda"), 0.5)  # a two-part kind (the distributed mode's) is kept too
    save(first, path)
    prior = load(path)
    assert prior is not None
    assert prior.entries() == [(FULL, 1.0), (FULL, 2.0), (FULL, 3.0), (("x", "cuda"), 0.5)]
    second = Durations(prior=prior)
    second.add(OTHER, 4.0)
    save(second, path)
    again = load(path)
    assert again is not None
    assert [seconds for _, seconds in again.entries()] == [1.0, 2.0, 3.0, 0.5, 4.0]


def test_an_unreadable_or_missing_file_is_no_prior(tmp_path: Path) -> None:
    assert load(tmp_path / "none.json") is None
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert load(bad) is None
    bad.write_text(json.dumps({"version": 1, "durations": [["p", "b", "full", "x"], 3]}))
    assert load(bad) is None
    bad.write_text(json.dumps({"version": 1, "durations": [["p", "b", "full", -1.0]]}))
    assert load(bad) is None


def test_the_durations_file_sits_beside_a_sqlite_database_file(tmp_path: Path) -> None:
    db = tmp_path / "kplay.sqlite3"
    assert durations_file(f"sqlite:///{db}") == tmp_path / "kplay.sqlite3-waits.json"
    assert durations_file("sqlite://") is None
    assert durations_file("sqlite:///:memory:") is None
    assert durations_file("postgresql://kplay@127.0.0.1/test") is None


def test_a_restarted_executor_estimates_before_its_first_job_ends(tmp_path: Path) -> None:
    path = tmp_path / "kplay.sqlite3-waits.json"
    executor = LocalExecutor(1, LIMITS, target=OK, durations_file=path)
    sink = Sink()
    executor.start(sink)
    try:
        jobs = [job("sleep") for _ in range(MIN_SAMPLES + 1)]
        for j in jobs:
            executor.submit(j)
        sink.wait_results(len(jobs))
    finally:
        executor.stop()
    # The first job ran on the fresh child: left out. Each later one held the worker for
    # its 0.5 s sleep and a little more.
    kept = load(path)
    assert kept is not None
    entries = kept.entries()
    assert [kind for kind, _ in entries] == [kind_of(jobs[0])] * MIN_SAMPLES
    assert all(0.5 <= seconds < 5.0 for _, seconds in entries)

    restarted = LocalExecutor(1, LIMITS, target=OK, durations_file=path)
    assert restarted.durations.prior is not None
    sink = Sink()
    restarted.start(sink)
    gate = tmp_path / "open"
    try:
        held = job(f"gate:{gate}")
        restarted.submit(held)
        sink.wait_event(held.job_id)
        waiting = job("sleep")
        restarted.submit(waiting)
        # Nothing has finished on this server; the earlier one's durations go by. (Once the
        # held job has run longer than every kept duration, it is due to end now: 0 s.)
        estimate = restarted.wait_estimate_s(waiting.job_id)
        assert estimate is not None and 0.0 <= estimate < 5.0
        gate.touch()
        sink.wait_results(2)
    finally:
        restarted.stop()


def test_without_a_file_nothing_is_kept_and_there_is_no_prior(tmp_path: Path) -> None:
    executor = LocalExecutor(1, LIMITS, target=OK)
    sink = Sink()
    executor.start(sink)
    gate = tmp_path / "open"
    try:
        held = job(f"gate:{gate}")
        executor.submit(held)
        sink.wait_event(held.job_id)
        waiting = job()
        executor.submit(waiting)
        assert executor.wait_estimate_s(waiting.job_id) is None
        gate.touch()
        sink.wait_results(2)
        # The gated job was the child's first: left out; the second one counts.
        assert executor.durations.samples(kind_of(waiting)) == [pytest.approx(0.0, abs=2.0)]
    finally:
        executor.stop()
    assert executor.durations.prior is None
    assert [p.name for p in tmp_path.iterdir()] == ["open"]  # the gate, and nothing kept
