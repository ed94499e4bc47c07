"""The adversarial suite: kernels that try to fool the harness, and what the harness does.

Every file under a problem's solutions/cheating/ declares the verdict it must get
(`kplay-expect:`); numba-cpu ones run here for real, CUDA C++ ones on a GPU only (here
they are compiled). The end-to-end tests around them watch the harness itself: fresh
poison before every repetition, rotated inputs, secret seeds, the too-fast verdict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kplay.kernels import check as check_mod
from kplay.kernels import evaluate as ev
from kplay.kernels import perf, rotation
from kplay.kernels.backends.base import Capability, get_backend
from kplay.kernels.catalog import get_problem, load_catalog
from kplay.kernels.models import RunJob, RunState
from kplay.kernels.problem import declared_verdict
from tests.kernels.slow_device import slow_device_ceilings

PROBLEMS = Path(__file__).resolve().parents[2] / "kernels" / "problems"
HONEST_ADD = (PROBLEMS / "vector_add/solutions/correct/vector_add.numba_cpu.py").read_text()


def _cheats() -> list[Any]:
    out = []
    for slug, spec in load_catalog().items():
        for backend, path in spec.solutions("cheating"):
            runs_here = get_backend(backend).capability() is Capability.run
            marks = () if runs_here else pytest.mark.gpu
            out.append(pytest.param(slug, backend, path, id=f"{slug}-{path.name}", marks=marks))
    return out


CHEATS = _cheats()


def _job(slug: str, backend: str, source: str, **kw: Any) -> RunJob:
    kw.setdefault("timing_cap_s", 0.1)
    return RunJob(problem=slug, backend=backend, source=source, **kw)


def test_the_suite_covers_both_cheats_on_both_sides() -> None:
    names = {p.values[2].name for p in CHEATS}
    assert {
        "returns_early_if_output_is_filled.numba_cpu.py",
        "returns_early_on_repeated_inputs.numba_cpu.py",
        "caches_by_pointer_and_samples.numba_cpu.py",
        "returns_early_if_output_is_filled.cu",
        "caches_in_device_buffer.cu",
    } <= names


@pytest.mark.parametrize("slug,backend,path", CHEATS)
def test_a_cheating_kernel_gets_the_verdict_it_declares(slug: str, backend: str, path: Path):
    expected = declared_verdict(path)
    result = ev.evaluate(_job(slug, backend, path.read_text()))
    assert result.state.value == expected, f"{result.state}: {result.message}"
    if expected == "wrong":
        assert not result.verified
        # Caught in a checked repetition ("... was wrong"), or, where the timing loop was too
        # short to repeat an input set (a loaded machine), by the re-check after it.
        said = result.message or ""
        assert "was wrong" in said or said.startswith("re-check after timing failed"), said
        # The time of a kernel caught cheating is not shown as its time.
        assert result.timing is not None and not result.timing.timed and not result.roofline
    if expected == "done":
        # Left nothing to exploit, it did its work: timed, checked, verified.
        assert result.timing is not None and result.timing.timed
        assert result.timing.checked_reps and result.verified


def test_cuda_cheats_compile_here_and_are_never_taken_as_run() -> None:
    """Without a GPU the CUDA C++ cheats are compiled only, and said to be."""
    for param in CHEATS:
        slug, backend, path = param.values
        if backend != "cuda" or get_backend("cuda").capability() is not Capability.compile_only:
            continue
        result = ev.evaluate(_job(slug, backend, path.read_text()))
        assert result.state is RunState.compiled and result.compile and result.compile.ok
        assert result.timing is not None and not result.timing.timed
        assert not result.verified


# ---------------------------------------------------------------- what the harness does


def _watch_launches(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Record, at the entry of every launch of the benchmark case, what the kernel finds."""
    seen: list[dict[str, Any]] = []
    original = ev._KernelRun.launch_for

    def launch_for(self: Any, params: dict) -> Any:
        launch = original(self, params)

        def watched(args: list[Any]) -> None:
            a, _b, out = args[0], args[1], args[2]
            seen.append(
                {
                    "n": int(params["n"]),
                    "a_address": a.ctypes.data,
                    "a": a.copy(),
                    "out_all_nan": bool(np.isnan(out).all()),
                }
            )
            launch(args)

        return watched

    monkeypatch.setattr(ev._KernelRun, "launch_for", launch_for)
    return seen


def test_every_timed_launch_finds_a_poisoned_output_and_other_inputs(monkeypatch) -> None:
    seen = _watch_launches(monkeypatch)
    result = ev.evaluate(_job("vector_add", "numba-cpu", HONEST_ADD))
    assert result.state is RunState.done, result.message
    bench = get_problem("vector_add").benchmarks[-1].params["n"]
    timed = [s for s in seen if s["n"] == bench]
    assert len(timed) >= result.timing.reps + 2  # warm-ups, repetitions, re-check
    assert all(s["out_all_nan"] for s in timed)
    # Two sets of buffers in turn, and each launch finds other inputs than the last one
    # that ran in the same buffers.
    assert len({s["a_address"] for s in timed}) == result.timing.buffer_sets == 2
    last_in: dict[int, np.ndarray] = {}
    for s in timed:
        before = last_in.get(s["a_address"])
        assert before is None or not np.array_equal(before, s["a"])
        last_in[s["a_address"]] = s["a"]
    assert result.timing.input_sets == 4


def test_a_timed_repetition_that_writes_nothing_makes_the_run_wrong(monkeypatch) -> None:
    """Honest in the check, lazy from the 3rd launch of the benchmark case on."""
    calls = {"bench": 0}
    original = ev._KernelRun.launch_for
    bench = get_problem("vector_add").benchmarks[-1].params["n"]

    def launch_for(self: Any, params: dict) -> Any:
        launch = original(self, params)

        def lazy(args: list[Any]) -> None:
            if params["n"] == bench:
                calls["bench"] += 1
                if calls["bench"] >= 3:
                    return
            launch(args)

        return lazy

    monkeypatch.setattr(ev._KernelRun, "launch_for", launch_for)
    # Every timed repetition checked: with a random quarter, all the lazy ones could go
    # unchecked (the re-check after timing still makes the run wrong, in other words).
    monkeypatch.setattr(rotation, "MIN_CHECK_SHARE", 1.0)
    result = ev.evaluate(_job("vector_add", "numba-cpu", HONEST_ADD))
    assert result.state is RunState.wrong
    assert result.message.startswith("the output of ")
    assert "repetition" in result.message and "Never written" in result.message
    failing = result.check.cases[-1]
    assert not failing.ok and "repetition" in failing.name and not result.verified


# ---------------------------------------------------------------- too fast for the device


def test_an_honest_run_faster_than_the_ceilings_ends_suspicious(monkeypatch) -> None:
    monkeypatch.setattr(perf, "ceilings_for_run", slow_device_ceilings)
    result = ev.evaluate(_job("vector_add", "numba-cpu", HONEST_ADD))
    assert result.state is RunState.suspicious, result.message
    assert result.state.is_final and not result.verified
    message = result.message or ""
    assert message.startswith("Timed at ") and "which would need" in message
    assert "this device's measured FP32 ceiling is 1 kFLOP/s" in message
    # The run is kept, with what was measured, for a reader to look at.
    assert result.check is not None and result.check.ok and result.check.recheck_ok
    assert result.timing is not None and result.timing.timed and result.roofline is not None
    assert result.roofline.percent_of_roofline > 100


def test_without_ceilings_a_run_is_done_but_not_verified(monkeypatch) -> None:
    monkeypatch.setattr(perf, "ceilings_for_run", lambda ops: None)
    result = ev.evaluate(_job("vector_add", "numba-cpu", HONEST_ADD))
    assert result.state is RunState.done and result.roofline is None
    assert not result.verified


# ---------------------------------------------------------------- seeds


def _watch_seeds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    seeds: list[int] = []
    original = check_mod._generate

    def generate(problem: Any, params: dict, seed: int, xp: Any) -> dict:
        seeds.append(seed)
        return original(problem, params, seed, xp)

    monkeypatch.setattr(check_mod, "_generate", generate)
    monkeypatch.setattr(check_mod, "MEMO", check_mod.Memo())
    return seeds


def test_a_real_run_draws_secret_seeds_and_records_none(monkeypatch) -> None:
    seeds = _watch_seeds(monkeypatch)
    job = _job("vector_add", "numba-cpu", HONEST_ADD, mode="check", seed=5)
    first = ev.evaluate(job)
    first_seeds = list(seeds)
    seeds.clear()
    second = ev.evaluate(job)
    public = {5 + c.seed for c in get_problem("vector_add").tests}
    assert len(first_seeds) == len(get_problem("vector_add").tests)
    assert not public & set(first_seeds) and not set(first_seeds) & set(seeds)
    for result in (first, second):
        assert result.system.seed is None and result.system.seeds == "secret"
        assert all(c.seed is None for c in result.check.cases)
        assert str(first_seeds[0]) not in result.model_dump_json()
    assert len(check_mod.MEMO._entries) == 0  # secret seeds never come back: not kept


def test_public_seeds_show_the_same_failing_case_again(monkeypatch) -> None:
    seeds = _watch_seeds(monkeypatch)
    wrong = HONEST_ADD.replace("a[i] + b[i]", "a[i] - b[i]")
    job = _job("vector_add", "numba-cpu", wrong, mode="check", seed=5, public_seeds=True)
    first, second = ev.evaluate(job), ev.evaluate(job)
    case = get_problem("vector_add").tests[0]
    assert seeds == [5 + case.seed]  # drawn once, then served from the memo
    for result in (first, second):
        assert result.state is RunState.wrong and not result.verified
        assert result.check.cases[-1].seed == 5 + case.seed
        assert result.system.seed == 5 and result.system.seeds == "public"
    assert first.check.cases[-1] == second.check.cases[-1]


def test_a_timed_run_on_public_seeds_is_never_verified() -> None:
    result = ev.evaluate(_job("vector_add", "numba-cpu", HONEST_ADD, public_seeds=True))
    assert result.state is RunState.done and result.timing.timed
    assert not result.verified


def test_only_timed_runs_on_real_hardware_are_verified() -> None:
    timed = ev.evaluate(_job("vector_add", "numba-cpu", HONEST_ADD))
    checked = ev.evaluate(_job("vector_add", "numba-cpu", HONEST_ADD, mode="check"))
    assert timed.state is checked.state is RunState.done
    assert timed.verified and not checked.verified
    simulated = PROBLEMS / "vector_add/solutions/correct/vector_add.numba_cuda.py"
    if get_backend("numba-cuda").capability() is Capability.simulate:
        result = ev.evaluate(_job("vector_add", "numba-cuda", simulated.read_text()))
        assert result.state is RunState.done and not result.timing.timed
        assert not result.verified


# ---------------------------------------------------------------- on a GPU


GPU_HONEST = [
    ("vector_add", "cuda", "vector_add.cu"),
    ("vector_add", "triton", "vector_add.triton.py"),
    ("saxpy", "numba-cuda", "saxpy.numba_cuda.py"),
    ("sgemm", "cuda", "sgemm_tiled.cu"),
]


@pytest.mark.gpu
@pytest.mark.parametrize("slug,backend,name", GPU_HONEST)
def test_honest_gpu_kernels_are_checked_every_repetition_and_verified(slug, backend, name):
    source = (PROBLEMS / slug / "solutions/correct" / name).read_text()
    result = ev.evaluate(_job(slug, backend, source, timing_cap_s=0.3))
    assert result.state is RunState.done and result.verified, result.message
    timing = result.timing
    assert timing.checked_policy == "every repetition, on the device"
    assert timing.checked_reps >= timing.reps  # the warm-ups are checked too
    assert timing.input_sets >= 2 and timing.buffer_sets >= 1


def test_a_run_found_wrong_after_timing_shows_no_time() -> None:
    """The re-check after timing is the last word: a run it finds wrong keeps how it was
    timed (the case, the input sets) and none of what the timing found."""
    from kplay.kernels.models import TimingStage
    from kplay.kernels.perf import withheld

    timed = TimingStage(
        timed=True, case="16M", params={"n": 16}, median_us=12.5, q1_us=12.0, q3_us=13.0,
        reps=40, input_sets=3, buffer_sets=2, checked_reps=5, timer="perf_counter",
    )  # fmt: skip
    shown = withheld(timed, "the output of the re-check after timing was wrong")
    assert shown is not None and not shown.timed
    assert shown.untimed_reason == "the output of the re-check after timing was wrong"
    assert shown.median_us is None and shown.q1_us is None and shown.reps is None
    assert (shown.case, shown.params, shown.input_sets, shown.checked_reps) == (
        "16M",
        {"n": 16},
        3,
        5,
    )
    assert withheld(None, "no timing") is None
