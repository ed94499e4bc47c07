"""Hidden grading cases in the engine: checked against the problem before they are kept, run
after the problem's own cases on numba-cpu, and reported without their shape. The kernel
here is wrong only when two elements are left over after its groups of four, which no public
case of vector_add has (n % 4 is 0, 1 or 3 in every one): the public cases pass it, and a
hidden case of n = 1002 catches it."""

from __future__ import annotations

import pytest

from kplay.kernels import evaluate as ev
from kplay.kernels import hiddencases as hc
from kplay.kernels.catalog import get_problem
from kplay.kernels.models import GradingCase, RunJob, RunState

TAIL_BUG = """import numba


@numba.njit(parallel=True)
def vector_add(a, b, out, n):
    body = n - n % 4
    for j in numba.prange(body // 4):
        i = 4 * j
        out[i] = a[i] + b[i]
        out[i + 1] = a[i + 1] + b[i + 1]
        out[i + 2] = a[i + 2] + b[i + 2]
        out[i + 3] = a[i + 3] + b[i + 3]
    # The elements left over: one or three of them are added; two are forgotten.
    if n % 4 == 1 or n % 4 == 3:
        for i in range(body, n):
            out[i] = a[i] + b[i]
"""
TALKS = """import numba


@numba.njit
def vector_add(a, b, out, n):
    if n == 1002:
        raise ValueError("n is 1002")
    for i in range(n):
        out[i] = a[i] + b[i]
"""
HIDDEN = GradingCase(name="two-left-over", params={"n": 1002}, seed=3)


def _job(source: str, **kw: object) -> RunJob:
    return RunJob(problem="vector_add", backend="numba-cpu", source=source, mode="check", **kw)


def test_no_public_case_leaves_two_over() -> None:
    problem = get_problem("vector_add")
    assert {int(c.params["n"]) % 4 for c in problem.tests} <= {0, 1, 3}


def test_cases_are_read_in_problem_toml_notation_and_checked() -> None:
    problem = get_problem("vector_add")
    text = '[[tests]]\nname = "two-left-over"\nparams = { n = 1002 }\nseed = 3\n'
    assert hc.parse_and_validate(problem, text) == [HIDDEN]
    # Without a seed, a case takes its place in the list.
    assert hc.parse_and_validate(problem, '[[tests]]\nname = "a"\nparams = { n = 6 }')[0].seed == 1
    attention = get_problem("attention_bwd")
    both = "batch = 1, heads = 1, seq = 3, dim = 64"
    made = hc.parse_and_validate(
        attention, f'[[tests]]\nname = "a"\nparams = {{ {both}, causal = true }}'
    )
    assert made[0].params["causal"] == 1
    with pytest.raises(hc.HiddenCaseError, match="causal is true or false"):
        hc.parse_and_validate(
            attention, f'[[tests]]\nname = "a"\nparams = {{ {both}, causal = 2 }}'
        )
    with pytest.raises(hc.HiddenCaseError, match="at most 64 MiB"):
        hc.parse_and_validate(
            attention,
            '[[tests]]\nname = "big"\n'
            "params = { batch = 8, heads = 16, seq = 4096, dim = 128, causal = false }",
        )


def test_the_public_cases_pass_the_kernel_and_the_hidden_one_catches_it() -> None:
    plain = ev.evaluate(_job(TAIL_BUG))
    assert plain.state is RunState.done, plain.message
    graded = ev.evaluate(_job(TAIL_BUG, hidden_cases=[HIDDEN], secret_seed=12345))
    assert graded.state is RunState.wrong
    public = get_problem("vector_add").tests
    cases = graded.check.cases
    assert [c.name for c in cases] == [*(c.name for c in public), "hidden-1"]
    last = cases[-1]
    assert not last.ok and last.hidden and last.params == {} and last.output == "out"
    assert last.first_mismatch_index is None and last.mismatches == 0 and last.grid is None
    assert graded.message.startswith("case hidden-1: wrong output (out)")
    text = graded.model_dump_json()
    assert "two-left-over" not in text and "1002" not in text and "1001" not in text


def test_a_right_kernel_passes_the_hidden_cases_too() -> None:
    honest = TAIL_BUG.replace("if n % 4 == 1 or n % 4 == 3:", "if n % 4:")
    graded = ev.evaluate(_job(honest, hidden_cases=[HIDDEN]))
    assert graded.state is RunState.done and graded.check.ok
    assert graded.check.cases[-1].hidden and graded.check.cases[-1].ok


def test_what_a_kernel_says_on_a_hidden_case_is_withheld() -> None:
    public = ev.evaluate(_job(TALKS))
    assert public.state is RunState.done
    graded = ev.evaluate(_job(TALKS, hidden_cases=[HIDDEN]))
    assert graded.state is RunState.runtime_error
    assert "hidden grading case hidden-1" in (graded.message or "")
    assert "1002" not in graded.model_dump_json()
