"""A grading run's inputs come from its assignment's hidden seed (RunJob.secret_seed): the
checker draws every case from that base, the same inputs each time it grades, and the
result records neither the base nor any case's seed, exactly as for a real run's secret
seeds; without one, each run draws its own."""

from __future__ import annotations

from typing import Any

import pytest

from kplay.kernels import check as check_mod
from kplay.kernels import evaluate as ev
from kplay.kernels.catalog import PROBLEMS_DIR, get_problem
from kplay.kernels.models import RunJob, RunState
from kplay.kernels.seeds import RunSeeds

HONEST_ADD = (PROBLEMS_DIR / "vector_add/solutions/correct/vector_add.numba_cpu.py").read_text()
HIDDEN = 4_611_686_018_427_387_000  # a 62-bit seed, as an assignment's are


def _watch_seeds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    seeds: list[int] = []
    original = check_mod._generate

    def generate(problem: Any, params: dict, seed: int, xp: Any) -> dict:
        seeds.append(seed)
        return original(problem, params, seed, xp)

    monkeypatch.setattr(check_mod, "_generate", generate)
    monkeypatch.setattr(check_mod, "MEMO", check_mod.Memo())
    return seeds


def _job(**kw: Any) -> RunJob:
    return RunJob(problem="vector_add", backend="numba-cpu", source=HONEST_ADD, mode="check", **kw)


def test_the_secret_seed_is_the_base_and_stays_secret() -> None:
    seeds = RunSeeds.for_job(_job(secret_seed=HIDDEN))
    assert seeds.base == HIDDEN and not seeds.public and not seeds.memoise
    case = get_problem("vector_add").tests[0]
    assert seeds.case(case) == HIDDEN + case.seed and seeds.shown(case) is None
    drawn = {RunSeeds.for_job(_job()).base for _ in range(3)}
    assert HIDDEN not in drawn and len(drawn) == 3  # without one: a fresh base per run
    public = RunSeeds.for_job(_job(seed=5, public_seeds=True, secret_seed=HIDDEN))
    assert public.public and public.base == 5  # asking for the public seeds still wins


def test_grading_draws_the_cases_from_the_hidden_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    seeds = _watch_seeds(monkeypatch)
    first = ev.evaluate(_job(secret_seed=HIDDEN))
    first_seeds = list(seeds)
    seeds.clear()
    second = ev.evaluate(_job(secret_seed=HIDDEN))
    cases = get_problem("vector_add").tests
    assert first_seeds == [HIDDEN + c.seed for c in cases]
    assert seeds == first_seeds  # graded again: the same hidden inputs, drawn again
    for result in (first, second):
        assert result.state is RunState.done and result.check.ok
        assert result.system.seed is None and result.system.seeds == "secret"
        assert all(c.seed is None for c in result.check.cases)
        text = result.model_dump_json()
        assert str(HIDDEN) not in text and str(HIDDEN + cases[0].seed) not in text
    assert len(check_mod.MEMO._entries) == 0  # secret inputs are never kept
