"""bench/wait_replay.py rebuilds the queue at each submit and asks the real estimator again."""

from __future__ import annotations

import pytest

from bench.wait_replay import evaluated_runs, replay


def queue_of_nine() -> dict:
    """Two workers, every run 10 s: runs 0-7 submitted at once, run 8 at 25 s."""
    records = []
    for i in range(9):
        submit = 25.0 if i == 8 else 0.01 * i
        start = 10.0 * (i // 2)
        records.append({
            "problem": "vector_add", "backend": "numba-cpu", "final_state": "done",
            "submit_at": submit, "queued_s_server": start - submit, "run_s_server": 10.0,
            "position_at_submit": i if i >= 2 else 0,
        })  # fmt: skip
    return {"run_records": records}


def test_a_queue_of_equal_runs_is_foreseen_exactly_once_runs_have_ended() -> None:
    runs = evaluated_runs(queue_of_nine(), [["vector_add", "numba-cpu", 10.0]] * 7, 2)
    assert [r["first"] for r in runs] == [True, True] + [False] * 7
    found = replay(runs, "none", [], 2, limit_s=10.0)
    # Runs 2-7 came before any run had ended (and the two that end first are the children's
    # first, left out): no estimate. Run 8 came at 25 s: 4 and 5 have 5 s left, 6 and 7
    # take 10 s each after them, so it starts at 40 s, 15 s later, as it did. (Every run
    # takes the 10 s limit here, so the limit counted among the durations changes nothing.)
    assert found["queued_runs"] == 7
    assert found["with_estimate"] == 1 and found["within_30pct"] == 1
    assert found["median_signed_rel_error"] == pytest.approx(0.0, abs=1e-9)


def test_a_prior_gives_every_queued_run_an_estimate_and_a_wrong_one_misses() -> None:
    runs = evaluated_runs(queue_of_nine(), [["vector_add", "numba-cpu", 10.0]] * 7, 2)
    right = replay(runs, "merged", [["vector_add", "numba-cpu", "full", 10.0]] * 20, 2, 10.0)
    assert right["with_estimate"] == 7 and right["within_30pct"] == 7
    wrong = replay(runs, "either", [["vector_add", "numba-cpu", "full", 30.0]] * 20, 2, 10.0)
    assert wrong["with_estimate"] == 7 and wrong["within_30pct"] == 0
