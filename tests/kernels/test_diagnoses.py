"""Wrong outputs are worded by what went wrong (kernels.diagnose), as the learner reads it.

Each class is shown by a wrong solution run through the engine on Numba's CPU backend,
and its exact words are checked; classes no CPU kernel here produces (a square transpose,
a strided store, an inf, a race) are checked on compare(), run_case() and the helpers directly.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from kplay.kernels.arrays import ArrayKind, ArrayOps, poison_bits, poison_value
from kplay.kernels.catalog import PROBLEMS_DIR, get_problem
from kplay.kernels.check import compare, run_case
from kplay.kernels.diagnose import race
from kplay.kernels.evaluate import evaluate
from kplay.kernels.models import RunJob, RunState
from kplay.kernels.problem import Case, Tolerance

NUM = r"-?\d+(\.\d+)?(e[-+]\d+)?"
EXACT = Tolerance(atol=0.0, rtol=0.0)


def _run(slug: str, name: str) -> tuple[str, object]:
    path = Path(PROBLEMS_DIR) / slug / "solutions" / "wrong" / f"{name}.numba_cpu.py"
    job = RunJob(problem=slug, backend="numba-cpu", source=path.read_text(), mode="check", seed=1)
    result = evaluate(job)
    assert result.state is RunState.wrong, result.message
    failed = [c for c in result.check.cases if not c.ok]
    return result.message or "", failed[0]


def _matches(pattern: str, message: str) -> None:
    """`pattern` is the message with NUM where a drawn number stands."""
    regex = re.escape(pattern).replace("NUM", NUM)
    assert re.fullmatch(regex, message), message


def _poisoned(shape: tuple[int, ...], dtype: str = "float32") -> np.ndarray:
    out = np.zeros(shape, dtype=dtype)
    out.view(f"int{8 * out.itemsize}")[...] = poison_bits(np.dtype(dtype))
    return out


# ---------------------------------------------------------------- never written


def test_an_element_the_kernel_never_wrote_is_called_never_written() -> None:
    message, case = _run("cpu_triad", "triad_chunks_round_down")
    _matches(
        "case one element: a[0]: expected NUM, got NaN; 1 of 1 elements wrong. Never "
        "written: a[0] still holds the poison the harness filled a with before the launch "
        "(a NaN with a marked bit pattern).",
        message,
    )
    assert case.grid is None  # a 1-D output has no grid


def test_integer_poison_and_several_unwritten_elements() -> None:
    exp = np.arange(6, dtype=np.int32)
    got = exp.copy()
    got[2:5] = poison_value(np.dtype("int32"))
    out = compare("idx", got, exp, EXACT)
    assert out["message"] == (
        "idx[2]: expected 2, got -732806895; 3 of 6 elements wrong. Never written: idx[2] "
        "and 2 more still hold the poison the harness filled idx with before the launch "
        "(the value -732806895)."
    )


# ---------------------------------------------------------------- written as NaN or inf


def test_adding_into_the_poisoned_output_is_told_from_never_writing_it() -> None:
    message, _ = _run("sgemm", "sgemm_output_not_cleared")
    _matches(
        "case 1x1x1: C[0, 0]: expected NUM, got NaN; 1 of 1 elements wrong. Written as NaN "
        "or inf: the kernel stored NaN in C[0, 0]. Accumulated into the poisoned output: "
        "this NaN is the harness's poison after arithmetic, so the kernel read C[0, 0] "
        "before writing it. Adding to an output that was not zeroed first gives NaN (the "
        "harness fills outputs with NaN before the launch).",
        message,
    )


def test_a_softmax_without_the_max_shift_is_told_exp_overflows() -> None:
    message, case = _run("softmax", "softmax_unstable")
    _matches(
        "case 1x1: out[0, 0]: expected 1, got NaN; 1 of 1 elements wrong. Written as NaN or "
        "inf: the kernel stored NaN in out[0, 0]. Overflow: the inputs reach NUM, and exp() "
        "of anything above 88.7 is inf in float32; inf / inf and inf - inf are NaN.",
        message,
    )
    assert case.grid is not None and "!" in case.grid


def test_inf_where_a_finite_value_was_expected_is_an_overflow() -> None:
    exp = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    got = exp.copy()
    got[1] = np.inf
    out = compare("y", got, exp, EXACT)
    assert out["message"] == (
        "y[1]: expected 2, got inf; 1 of 3 elements wrong. Written as NaN or inf: the "
        "kernel stored inf in y[1]. Overflow: the expected value is finite, so a result "
        "went past the largest float32 (3.4e+38), or something was divided by zero."
    )


def test_nan_from_inputs_where_exp_underflows_is_zero_over_zero() -> None:
    exp = np.full(4, 0.25, dtype=np.float32)
    got = exp.copy()
    got[0] = np.nan
    inputs = {"x": np.full(4, -120.0, dtype=np.float32)}
    out = compare("out", got, exp, EXACT, inputs)
    assert out["message"].endswith(
        "Written as NaN or inf: the kernel stored NaN in out[0]. 0/0: the inputs go down to "
        "-120, and exp() of anything below -103 is 0 in float32; 0 / 0 is NaN."
    )


# ---------------------------------------------------------------- written out of place


def test_a_copy_instead_of_a_transpose_is_called_transposed() -> None:
    message, case = _run("transpose", "transpose_copies_row_major")
    _matches(
        "case 17x33: out[0, 1]: expected NUM, got NUM; 544 of 561 elements wrong. Written "
        "out of place, transposed: read row by row, out holds the expected 33x17 result "
        "with rows and columns swapped (as a 17x33 matrix).",
        message,
    )
    assert case.grid.splitlines()[:4] == [
        "out rows 0-7, columns 0-7 (. right, x wrong value, ? never written, ! NaN or inf written)",
        "  0 1 2 3 4 5 6 7",
        "0 . x x x x x x x",
        "1 x x x x x x x x",
    ]


def test_a_square_output_holding_its_transpose() -> None:
    exp = np.arange(16, dtype=np.float32).reshape(4, 4)
    out = compare("C", exp.T.copy(), exp, EXACT)
    assert out["message"] == (
        "C[0, 1]: expected 1, got 4; 12 of 16 elements wrong. Written out of place, "
        "transposed: C[i, j] holds the value expected at C[j, i]."
    )


def test_a_store_one_place_late_is_called_shifted() -> None:
    message, _ = _run("vector_add", "store_one_place_late")
    _matches(
        "case less than a warp: out[1]: expected NUM, got NUM; 18 of 19 elements wrong. "
        "Written out of place, shifted by -1: out[i] holds the value expected at out[i - 1].",
        message,
    )


def test_rows_shifted_and_a_strided_store() -> None:
    exp = np.arange(1, 41, dtype=np.float32).reshape(8, 5)
    got = exp.copy()
    got[:-2] = exp[2:]
    out = compare("M", got, exp, EXACT)
    assert out["message"].endswith(
        "Written out of place, shifted by 2 rows: M[r, c] holds the value expected at M[r + 2, c]."
    )
    exp = np.arange(1, 101, dtype=np.float32)
    got = _poisoned((100,))
    got[::2] = exp[:50]  # out[2 * i] = value of i; the odd elements never written
    out = compare("v", got, exp, EXACT)
    assert out["message"] == (
        "v[1]: expected 2, got NaN; 99 of 100 elements wrong. Never written: v[1] and 49 "
        "more still hold the poison the harness filled v with before the launch (a NaN "
        "with a marked bit pattern). Of the 99 wrong elements: 50 never written and 49 "
        "other wrong values."
    )
    got[1::2] = 0
    out = compare("v", got, exp, EXACT)
    assert out["message"].endswith(
        "Written out of place, strided: v[2 * i] holds the value expected at v[i] (flat indices)."
    )


# ---------------------------------------------------------------- tolerance


def test_tf32_rounded_products_are_close_but_outside_the_tolerance() -> None:
    message, _ = _run("sgemm", "sgemm_tf32_inputs")
    _matches(
        "case 33x31x40: C[NUM, NUM]: expected NUM, got NUM; NUM of 1023 elements wrong. "
        "Close, but outside the tolerance: the largest errors are NUM (absolute) and NUM "
        "(relative); the tolerance is 0.001 + 0.0001 * |expected| (atol 0.001, rtol 0.0001).",
        message,
    )


def test_values_far_off_get_no_class() -> None:
    exp = np.array([1.0, 2.0], dtype=np.float32)
    out = compare("z", np.array([1.0, 7.5], dtype=np.float32), exp, Tolerance(atol=1e-6, rtol=1e-6))
    assert out["message"] == "z[1]: expected 2, got 7.5; 1 of 2 elements wrong."


# ---------------------------------------------------------------- race


def test_two_launches_that_differ_are_worded_as_a_race() -> None:
    first = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert race("out", first, first.copy()) is None
    second = first.copy()
    second[1, 2] = 9.0
    assert race("out", first, second) == (
        "Race: out differs between two launches on the same inputs: 1 of 6 elements "
        "changed, the first at out[1, 2] (5 one time, 9 the other). A correct kernel gives "
        "the same output every time; threads that write the same element, or read one "
        "another's results without a barrier or an atomic, give answers that change from "
        "run to run."
    )


def _triad_launcher(jitter_on_launch: int | None):  # type: ignore[no-untyped-def]
    """A triad launch over NumPy arrays that is off by 0.5 at a[3] on one launch only
    (None: on every launch) - the output a racing kernel gives from launch to launch."""
    launches = []

    def launch(args: list) -> None:  # type: ignore[type-arg]
        a, b, c, s, n = args
        launches.append(1)
        a[:n] = b[:n] + s * c[:n]
        if jitter_on_launch is None or len(launches) == jitter_on_launch:
            a[3] += 0.5

    return launch, launches


def test_a_wrong_case_whose_output_changes_between_launches_is_called_a_race() -> None:
    problem = get_problem("cpu_triad")
    case = Case(name="race", params={"n": 64})
    ops = ArrayOps(ArrayKind.numpy)
    launch, launches = _triad_launcher(jitter_on_launch=1)
    check, _ = run_case(problem, case, ops, launch, seed=7, memoise=False)
    assert not check.ok and len(launches) == 2
    _matches(
        "Race: a differs between two launches on the same inputs: 1 of 64 elements changed, "
        "the first at a[3] (NUM one time, NUM the other). A correct kernel gives the same "
        "output every time; threads that write the same element, or read one another's "
        "results without a barrier or an atomic, give answers that change from run to run. "
        "First launch: a[3]: expected NUM, got NUM; 1 of 64 elements wrong.",
        check.message or "",
    )


def test_a_wrong_case_that_is_wrong_the_same_way_twice_is_not_a_race() -> None:
    problem = get_problem("cpu_triad")
    launch, launches = _triad_launcher(jitter_on_launch=None)
    check, _ = run_case(
        problem, Case(name="same", params={"n": 64}), ArrayOps(ArrayKind.numpy), launch, 7, False
    )
    assert not check.ok and len(launches) == 2
    assert (check.message or "").startswith("a[3]: expected ")
    assert "Race" not in (check.message or "")


def test_differences_inside_the_tolerance_are_not_a_race() -> None:
    # Float atomics add in any order: a last-bit difference between launches is allowed.
    first = np.array([1.0, 2.0], dtype=np.float32)
    second = np.nextafter(first, np.float32(3.0))
    assert race("out", first, second) is not None
    assert race("out", first, second, Tolerance(atol=1e-5, rtol=1e-5)) is None


# ---------------------------------------------------------------- plain numbers


def test_messages_show_plain_python_numbers() -> None:
    exp = np.arange(300, dtype=np.float32)
    got = exp.copy()
    got[np.int64(256)] = np.float32(-1.5)
    out = compare("out", got, exp, EXACT)
    assert out["message"].startswith("out[256]: expected 256, got -1.5; 1 of 300 ")
    assert "np." not in out["message"]
    assert all(type(i) is int for i in out["first_mismatch_index"])
