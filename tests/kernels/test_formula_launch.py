import pytest

from kplay.kernels import formula
from kplay.kernels.launch import LaunchError, parse_directive, plan, resolve
from kplay.kernels.models import LaunchOverride
from kplay.kernels.problem import LaunchDefault


def test_formulas_evaluate_with_functions():
    assert formula.evaluate_int("ceil_div(n, 256)", {"n": 257}) == 2
    assert formula.evaluate("2*M*N*K", {"M": 2, "N": 3, "K": 4}) == 48
    assert formula.names("ceil_div(n, BLOCK) + m") == {"n", "BLOCK", "m"}


@pytest.mark.parametrize(
    "bad", ["__import__('os')", "n.real", "[1, 2]", "lambda: 1", "n if n else 1"]
)
def test_formulas_refuse_anything_but_arithmetic(bad):
    with pytest.raises(formula.FormulaError):
        formula.evaluate(bad, {"n": 1})


def test_unknown_name_and_division_by_zero_are_clear():
    with pytest.raises(formula.FormulaError, match="unknown name 'm'"):
        formula.evaluate("m + 1", {"n": 1})
    with pytest.raises(formula.FormulaError, match="division by zero"):
        formula.evaluate("n // 0", {"n": 1})


def test_directive_overrides_default_and_job_overrides_directive():
    default = LaunchDefault(kernel="k", grid=["ceil_div(n, 256)"], block=["256"])
    src = "int x;\n// kplay: grid=(ceil_div(n,BLOCK),2) block=(128,1) smem=1024 BLOCK=512\n"
    items, line = parse_directive(src)
    assert line == 2 and items["BLOCK"] == "512"
    p = plan(default, src, None)
    spec = resolve(p, {"n": 1000})
    assert spec.grid == (2, 2) and spec.block == (128, 1) and spec.shared_mem_bytes == 1024
    assert spec.constants == {"BLOCK": 512}
    spec2 = resolve(plan(default, src, LaunchOverride(block=["64"])), {"n": 1000})
    assert spec2.block == (64,)


def test_bad_directive_names_its_line():
    default = LaunchDefault(kernel="k", grid=["1"], block=["1"])
    with pytest.raises(LaunchError, match="line 3"):
        plan(default, "a\nb\n# kplay: grid\n", None)
    with pytest.raises(LaunchError, match="unknown name"):
        resolve(plan(default, "# kplay: grid=nope\n", None), {"n": 1})
