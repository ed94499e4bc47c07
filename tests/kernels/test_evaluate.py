"""One evaluation end to end on Numba's CPU backend: each way a compiled kernel's run ends."""

from __future__ import annotations

from typing import Any

from kplay.kernels import compiling
from kplay.kernels import evaluate as ev
from kplay.kernels.models import RunJob, RunState

ADD = """import numba


@numba.njit
def vector_add(a, b, out, n):
    for i in range(n):
        out[i] = a[i] + b[i]
"""

SUBTRACT = ADD.replace("a[i] + b[i]", "a[i] - b[i]")

RAISES = """import numba


def vector_add(a, b, out, n):
    raise ValueError("not today")


vector_add = numba.njit(vector_add)
"""


def _job(source: str, **kw: Any) -> RunJob:
    return RunJob(problem="vector_add", backend="numba-cpu", source=source, seed=7, **kw)


def test_a_correct_kernel_is_checked_timed_and_placed() -> None:
    result = ev.evaluate(_job(ADD, timing_cap_s=0.05))
    assert result.state is RunState.done and result.message == "Correct.", result.message
    assert result.check is not None and result.check.ok and result.check.recheck_ok
    assert result.timing is not None and result.timing.timed
    assert result.compile is not None and result.compile.ok
    assert result.system is not None and result.system.kind == "cpu"


def test_a_check_only_run_says_why_it_is_untimed() -> None:
    result = ev.evaluate(_job(ADD, mode="check"))
    assert result.state is RunState.done
    assert result.message == "Correct. Untimed: check-only run."
    assert result.timing is not None and not result.timing.timed
    assert result.timing.untimed_reason == "check-only run"


def test_a_wrong_kernel_names_its_first_failing_case() -> None:
    result = ev.evaluate(_job(SUBTRACT, mode="check"))
    assert result.state is RunState.wrong
    assert result.check is not None and not result.check.ok
    bad = result.check.cases[-1]
    assert not bad.ok and result.message == f"case {bad.name}: {bad.message}"
    assert result.compile is not None and result.system is not None  # kept on every ending


def test_a_kernel_that_raises_ends_as_a_runtime_error_with_its_line() -> None:
    result = ev.evaluate(_job(RAISES, mode="check"))
    assert result.state is RunState.runtime_error
    assert result.message is not None and "ValueError" in result.message
    assert result.check is not None and "line 5" in (result.check.message or "")


def test_the_same_source_compiles_once_and_the_cache_stays_bounded() -> None:
    compiling._COMPILED.clear()
    first = ev.evaluate(_job(ADD, mode="check"))
    assert len(compiling._COMPILED) == 1
    [(stage, kernel)] = compiling._COMPILED.values()
    again = ev.evaluate(_job(ADD, mode="check"))
    [(kept_stage, kept_kernel)] = compiling._COMPILED.values()
    assert kept_stage is stage and kept_kernel is kernel  # not compiled again
    assert again.compile == first.compile  # a copy of the stored stage, not the stored one
    assert again.compile is not stage
    assert compiling._COMPILED.maxsize == 32
