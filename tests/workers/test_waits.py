"""The wait estimate: what runs now and what waits ahead, each by its kind's durations."""

from __future__ import annotations

import pytest

from kplay.workers.waits import MIN_SAMPLES, Durations, remaining_s, start_in_s

FAST = ("vector_add", "numba-cpu")
SLOW = ("sgemm", "triton")


def durations() -> Durations:
    d = Durations()
    for _ in range(MIN_SAMPLES):
        d.add(FAST, 1.0)
        d.add(SLOW, 10.0)
    return d


def test_remaining_time_is_the_mean_excess_of_longer_jobs() -> None:
    samples = [1.0, 1.0, 5.0, 30.0]
    assert remaining_s(0.0, samples, 30.0) == pytest.approx(37.0 / 4)
    # Past the short ones: only the 5 s and the 30 s jobs are still like it.
    assert remaining_s(2.0, samples, 30.0) == pytest.approx((3.0 + 28.0) / 2)
    # Past every recent job: it runs to the limit.
    assert remaining_s(31.0, samples, 40.0) == pytest.approx(9.0)
    assert remaining_s(50.0, samples, 40.0) == 0.0


def test_the_jobs_ahead_count_by_their_kind() -> None:
    d = durations()
    slow_ahead = start_in_s([], [SLOW, SLOW], 1, d.samples)
    fast_ahead = start_in_s([], [FAST, FAST], 1, d.samples)
    assert slow_ahead == pytest.approx(20.0)
    assert fast_ahead == pytest.approx(2.0)


def test_workers_share_the_queue_and_running_jobs_hold_theirs() -> None:
    d = durations()
    # Two workers, one 4 s into a slow job, one idle: the slow job ahead goes to the idle
    # one, the fast one to whichever frees first (the first, after 6 s more).
    assert start_in_s([(SLOW, 4.0)], [SLOW, FAST], 2, d.samples) == pytest.approx(7.0)
    assert start_in_s([(SLOW, 4.0)], [], 2, d.samples) == 0.0
    assert start_in_s([(SLOW, 4.0)], [], 1, d.samples) == pytest.approx(6.0)


def test_no_durations_no_estimate_and_few_fall_back_to_the_backend() -> None:
    d = Durations()
    assert start_in_s([], [FAST], 1, d.samples) is None
    for _ in range(MIN_SAMPLES):
        d.add(("saxpy", "numba-cpu"), 2.0)
    d.add(FAST, 100.0)  # one job of its own kind is not enough to go by
    assert d.samples(FAST) == [2.0] * MIN_SAMPLES + [100.0]
    assert d.samples(("sum", "numba-cpu")) == [2.0] * MIN_SAMPLES + [100.0]
    assert start_in_s([], [FAST], 0, d.samples) is None


def test_durations_keep_the_most_recent() -> None:
    d = Durations(kept=3)
    for seconds in (1.0, 2.0, 3.0, 4.0, 5.0, 6.0):
        d.add(FAST, seconds)
    assert d.samples(FAST) == [4.0, 5.0, 6.0]
