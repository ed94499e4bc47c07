import numpy as np

from kernels.check import compare
from kernels.problem import Tolerance

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


def test_nan_never_passes_and_is_called_unwritten():
    exp = np.ones(4, dtype=np.float32)
    got = exp.copy()
    got[3] = np.nan
    out = compare("out", got, exp, TOL)
    assert not out["ok"] and "never written" in out["message"]
