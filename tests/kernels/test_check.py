import numpy as np
import pytest

from kplay.kernels.arrays import poison_bits
from kplay.kernels.check import compare
from kplay.kernels.problem import Tolerance

TOL = Tolerance(atol=1e-5, rtol=1e-5)


def test_compare_passes_close_values_and_reports_error_sizes():
    exp = np.linspace(1, 2, 10, dtype=np.float32)
    got = exp + np.float32(1e-6)
    out = compare("out", got, exp, TOL)
    assert out["ok"] and out["max_abs_err"] > 0


def test_compare_names_first_mismatch_with_expected_and_got():
    exp = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
    got = exp.copy()
    got[1, 2] += 1
    got[2, 3] += 5
    out = compare("C", got, exp, TOL)
    assert not out["ok"]
    assert out["first_mismatch_index"] == [1, 2]
    assert out["expected"] == 7.0 and out["got"] == 8.0
    assert out["mismatches"] == 2


def test_nan_never_passes_and_the_poison_is_called_unwritten():
    exp = np.ones(4, dtype=np.float32)
    got = exp.copy()
    got.view(np.int32)[3] = poison_bits(np.float32)  # what the harness filled it with
    out = compare("out", got, exp, TOL)
    assert not out["ok"] and "Never written" in out["message"]
    got[3] = np.nan  # a NaN the kernel wrote is wrong too, and not called unwritten
    out = compare("out", got, exp, TOL)
    assert not out["ok"] and "Written as NaN or inf" in out["message"]
    assert "Never written" not in out["message"]


# ---------------------------------------------------------------- the memo of inputs


def _fresh_memo(monkeypatch, mib: str = "1024"):
    import kplay.kernels.check as check

    monkeypatch.setenv("KPLAY_ENGINE_MEMO_MB", mib)
    monkeypatch.setattr(check, "MEMO", check.Memo())
    return check


def test_memoised_inputs_equal_a_fresh_draw_and_are_read_only(monkeypatch):
    from kplay.kernels.catalog import get_problem

    check = _fresh_memo(monkeypatch)
    problem = get_problem("vector_add")
    params = {"n": 1000}
    first = check.generate_inputs(problem, params, 7)
    again = check.generate_inputs(problem, params, 7)
    fresh = check._generate(problem, params, 7, np)
    for name, arr in fresh.items():
        assert again[name] is first[name]  # served from the memo
        np.testing.assert_array_equal(again[name], arr)
        with pytest.raises(ValueError):
            again[name][0] = 1.0  # nobody downstream may write to a memoised array
    other = check.generate_inputs(problem, params, 8)
    assert not np.array_equal(other["a"], first["a"])  # another seed, other numbers


def test_memoised_reference_outputs_match_the_reference(monkeypatch):
    from kplay.kernels.catalog import get_problem

    check = _fresh_memo(monkeypatch)
    problem = get_problem("vector_add")
    params = {"n": 1000}
    inputs = check.generate_inputs(problem, params, 3)
    out = check.expected_outputs(problem, params, 3, inputs)
    direct = problem.reference.reference(dict(inputs), params)
    for name in direct:
        np.testing.assert_array_equal(out[name], direct[name])
    assert check.expected_outputs(problem, params, 3, inputs)[name] is out[name]


def test_memo_keeps_to_its_budget_and_can_be_switched_off(monkeypatch):
    check = _fresh_memo(monkeypatch, "1")  # 1 MiB: entries up to 512 KiB are kept
    memo = check.MEMO
    small = {"x": np.zeros(50_000, dtype=np.float32)}  # 200 KB
    for i in range(8):
        memo.put(("k", i), dict(small))
    kept = [i for i in range(8) if memo.get(("k", i)) is not None]
    assert kept == [3, 4, 5, 6, 7]  # least recently used out first, 1 MiB in all
    memo.put(("big",), {"x": np.zeros(200_000, dtype=np.float32)})  # 800 KB > half
    assert memo.get(("big",)) is None
    monkeypatch.setenv("KPLAY_ENGINE_MEMO_MB", "0")
    memo.put(("off",), {"x": np.zeros(4, dtype=np.float32)})
    assert memo.get(("off",)) is None


def test_a_run_names_an_unknown_benchmark_case():
    from kplay.kernels.evaluate import evaluate
    from kplay.kernels.models import RunJob, RunState

    job = RunJob(
        problem="vector_add", backend="numba-cpu", source="def f(): pass", benchmark="huge"
    )
    result = evaluate(job)
    assert result.state is RunState.rejected
    assert "no benchmark case 'huge'" in result.message
    assert "'4x the last-level cache'" in result.message


def _gpu_compare_cases():
    rng = np.random.default_rng(5)
    exp = rng.standard_normal((1200, 900)).astype(np.float32)
    close = exp + np.float32(1e-6)
    off = exp.copy()
    off[17, 3] += 1.0
    unwritten = exp.copy()
    unwritten[-1, -1] = np.nan
    return exp, {"close": close, "off": off, "unwritten": unwritten}


@pytest.mark.gpu
def test_the_gpu_comparison_agrees_with_the_host_one():
    import cupy

    from kplay.kernels.check import compare_on_device

    exp, cases = _gpu_compare_cases()
    tol = Tolerance(atol=1e-5, rtol=1e-5)
    on_host = compare("C", cases["close"], exp, tol)
    on_gpu = compare_on_device(cupy.asarray(cases["close"]), exp, tol)
    assert on_gpu is not None and on_gpu["ok"]
    assert abs(on_gpu["max_abs_err"] - on_host["max_abs_err"]) <= 1e-12
    assert abs(on_gpu["max_rel_err"] - on_host["max_rel_err"]) <= 1e-9
    # A mismatch or a NaN is handed back to the host comparison, which words the message.
    assert compare_on_device(cupy.asarray(cases["off"]), exp, tol) is None
    assert compare_on_device(cupy.asarray(cases["unwritten"]), exp, tol) is None
    assert compare_on_device(cupy.asarray(exp[:10]), exp, tol) is None  # shape differs
