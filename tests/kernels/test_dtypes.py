"""The element types: low-precision floats, exact integers and bools, packed 4-bit data."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from kplay.kernels import dtypes, exact
from kplay.kernels.arrays import ArrayOps, poison_value
from kplay.kernels.backends.base import ArrayKind
from kplay.kernels.catalog import ProblemLoadError, load_problem
from kplay.kernels.check import compare
from kplay.kernels.draws import Draws
from kplay.kernels.problem import Tolerance
from tests.kernels.problem_kit import check_with, write_problem


def test_the_low_precision_defaults_are_one_unit_in_the_last_place():
    assert dtypes.DEFAULT_TOLERANCES["bfloat16"] == (2.0**-133, 2.0**-7)
    assert dtypes.DEFAULT_TOLERANCES["float16"] == (2.0**-24, 2.0**-10)
    assert dtypes.DEFAULT_TOLERANCES["float8_e4m3fn"] == (2.0**-9, 2.0**-3)
    assert dtypes.DEFAULT_TOLERANCES["float8_e5m2"] == (2.0**-16, 2.0**-2)
    assert dtypes.DEFAULT_TOLERANCES["float4_e2m1x2"] == (0.5, 0.5)
    assert "float32" not in dtypes.DEFAULT_TOLERANCES  # the problem states its own


def test_one_unit_apart_passes_and_two_do_not():
    atol, rtol = dtypes.DEFAULT_TOLERANCES["bfloat16"]
    tol = Tolerance.of("bfloat16", atol, rtol)
    exp = np.array([1.0, 3.0, -200.0], dtype=ml_dtypes.bfloat16)
    up_one = (exp.view(np.uint16) + 1).view(ml_dtypes.bfloat16)
    up_two = (exp.view(np.uint16) + 2).view(ml_dtypes.bfloat16)
    assert compare("o", up_one, exp.astype(np.float64), tol)["ok"]
    assert not compare("o", up_two, exp.astype(np.float64), tol)["ok"]


def test_packing_puts_the_even_element_in_the_low_nibble_and_rounds_as_ml_dtypes():
    assert dtypes.pack4(np.array([1, 2]), "uint4x2").tolist() == [0x21]
    ints = np.array([[-8, 7, 0, -1, 3, 5]])
    assert dtypes.unpack4(dtypes.pack4(ints, "int4x2"), "int4x2").tolist() == ints.tolist()
    values = np.linspace(-9.0, 9.0, 230)
    nibbles = values.astype(ml_dtypes.float4_e2m1fn).view(np.uint8)
    assert (
        dtypes.pack4(values, "float4_e2m1x2").tolist()
        == (nibbles[0::2] | (nibbles[1::2] << 4)).tolist()
    )
    with pytest.raises(ValueError, match="lie in"):
        dtypes.pack4(np.array([8, 0]), "int4x2")


def test_integer_fills_are_each_others_complement_and_the_bool_fill_is_no_bool():
    for name in ("int8", "uint8", "int16", "uint32", "int64", "uint64"):
        storage = dtypes.get(name).storage
        first, second = poison_value(storage), poison_value(storage, second=True)
        width = f"uint{8 * storage.itemsize}"
        a = int(np.asarray(first).view(width))
        b = int(np.asarray(second).view(width))
        assert a ^ b == (1 << (8 * storage.itemsize)) - 1, name
    assert int(poison_value(np.dtype(np.int32))) == -0x2BADBEEF
    assert int(poison_value(np.dtype(np.bool_))) == 0x5A
    bf16 = int(np.asarray(poison_value(np.dtype(ml_dtypes.bfloat16))).view(np.uint16))
    assert bf16 & 0x7F80 == 0x7F80 and bf16 & 0x7F and not bf16 & 0x40  # a signalling NaN


@pytest.mark.parametrize("kind", [ArrayKind.numpy, ArrayKind.torch_cpu])
@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "bool", "uint16"])
def test_arrays_keep_their_bits_both_ways(kind: ArrayKind, name: str):
    ops = ArrayOps(kind)
    storage = dtypes.get(name).storage
    host = np.array([1.5, -2.0, 0.25, 0.0]).astype(storage)
    dev = ops.to_device(host)
    assert np.array_equal(ops.to_host(dev).view(np.uint8), host.view(np.uint8))
    out = ops.empty_like_poisoned((4,), storage, zeros=False)
    bits = ops.to_host(out).view(f"uint{8 * storage.itemsize}")
    want = np.asarray(poison_value(storage)).view(f"uint{8 * storage.itemsize}")
    assert (bits == want).all()
    if kind is ArrayKind.numpy and dtypes.get(name).extension:
        seen = ops.for_kernel(dev)  # Numba gets the bits, in the same memory
        assert seen.dtype == np.dtype(f"uint{8 * storage.itemsize}")
        assert np.shares_memory(seen, dev)


def test_integer_draws_are_in_range_repeatable_and_recomputable_alone():
    draws = Draws(5)
    values = draws.integers((40, 7), -3, 250, "int16")
    assert values.dtype == np.int16 and values.min() >= -3 and values.max() <= 250
    assert np.array_equal(values, Draws(5).integers((40, 7), -3, 250, "int16"))
    assert all(draws.element(0, i) == values.reshape(-1)[i] for i in (0, 17, 279))
    at = np.array([3, 100, 279])
    assert np.array_equal(
        Draws(5, at=at).integers((40, 7), -3, 250, "int16"), values.reshape(-1)[at]
    )
    assert len(np.unique(Draws(9).integers(5000, 0, 255, "uint8"))) == 256
    with pytest.raises(ValueError, match="must fit"):
        Draws(1).integers(3, 0, 256, "uint8")


def test_low_precision_draws_round_a_float32_draw():
    draws = Draws(2)
    got = draws.uniform(50, -3.0, 3.0, "bfloat16")
    want = Draws(2).uniform(50, -3.0, 3.0, "float32").astype(ml_dtypes.bfloat16)
    assert got.dtype == np.dtype(ml_dtypes.bfloat16) and np.array_equal(got, want)
    assert draws.element(0, 7) == want[7]
    with pytest.raises(ValueError, match="drawn on the host"):
        Draws(2, xp=_FakeCupy()).uniform(3, 0.0, 1.0, "float8_e5m2")


class _FakeCupy:
    """Only its name matters: Draws asks whether it draws on the device by the name."""

    __name__ = "cupy"


def test_integers_are_compared_exactly_not_through_float64():
    tol = Tolerance.of("int64")
    exp = np.array([2**53, 5], dtype=np.int64)
    got = np.array([2**53 + 1, 5], dtype=np.int64)
    assert float(got[0]) == float(exp[0])  # what a float64 comparison would see
    out = compare("out", got, exp, tol)
    assert not out["ok"] and "expected 9007199254740992, got 9007199254740993" in out["message"]


def test_an_unwritten_uint8_is_worded_with_the_fill_as_an_integer():
    tol = Tolerance.of("uint8")
    exp = np.array([7, 8, 9], dtype=np.uint8)
    got = exp.copy()
    got[1] = poison_value(np.dtype(np.uint8))
    message = compare("grey", got, exp, tol)["message"]
    assert "grey[1]: expected 8, got 165" in message
    assert "165 (0xA5)" in message and "never written, or written with that value" in message
    assert ".0" not in message


def test_a_bool_is_compared_by_its_byte():
    tol = Tolerance.of("bool")
    exp = np.array([True, False, True])
    got = exp.copy()
    got.view(np.uint8)[0] = 0x5A  # what the harness filled it with: truthy, yet not true
    assert bool(got[0]) and (got == exp).all()  # NumPy alone would call it equal
    out = compare("mask", got, exp, tol)
    assert not out["ok"] and "0x5A" in out["message"] and "Never written" in out["message"]


def test_packed_floats_are_unpacked_before_the_tolerance():
    atol, rtol = dtypes.DEFAULT_TOLERANCES["float4_e2m1x2"]
    tol = Tolerance.of("float4_e2m1x2", atol, rtol)
    exp = dtypes.pack4(np.array([1.0, 6.0, -3.0, 0.5]), "float4_e2m1x2")
    near = dtypes.pack4(np.array([1.5, 6.0, -3.0, 0.5]), "float4_e2m1x2")
    far = dtypes.pack4(np.array([1.0, 6.0, 3.0, 0.5]), "float4_e2m1x2")
    assert compare("q", near, exp, tol)["ok"]
    out = compare("q", far, exp, tol)
    assert not out["ok"] and out["first_mismatch_index"] == [2]
    assert exact.count(far, exp, tol)[0] == 1


# ------------------------------------------------------------------ whole cases

INT_ARGS = """\
[[args]]
name = "x"
dtype = "int32"
shape = ["n"]
role = "in"

[[args]]
name = "out"
dtype = "int32"
shape = ["n"]
role = "out"

[[args]]
name = "n"
dtype = "int32"
role = "param"
"""

# x[5] holds the first fill itself: an output left unwritten there matches after one launch.
INT_REFERENCE = """\
def generate(params, draw):
    x = draw.integers(int(params["n"]), -1000, 1000, "int32")
    x[5] = -0x2BADBEEF
    return {"x": x}


def reference(inputs, params):
    return {"out": inputs["x"].copy()}
"""


def _int_problem(tmp_path: Path):
    return load_problem(write_problem(tmp_path, "int_copy", INT_ARGS, INT_REFERENCE, extra=""))


def test_an_element_equal_to_the_fill_and_never_written_is_caught_by_the_second_fill(
    tmp_path: Path,
):
    problem = _int_problem(tmp_path)

    def skips_five(x, out, n):
        for i in range(n):
            if i != 5:
                out[i] = x[i]

    check, launches = check_with(problem, skips_five)
    assert not check.ok and launches >= 2
    assert "Second launch" in check.message and "held the fill in both launches" in check.message
    assert check.first_mismatch_index == [5]


def test_a_correct_integer_kernel_passes_both_fills(tmp_path: Path):
    problem = _int_problem(tmp_path)

    def copies(x, out, n):
        out[:n] = x[:n]

    check, launches = check_with(problem, copies)
    assert check.ok and launches == 2  # the expected output holds the fill: one more launch


def test_a_written_fill_value_is_not_called_unwritten(tmp_path: Path):
    problem = _int_problem(tmp_path)

    def writes_the_fill(x, out, n):
        out[:n] = x[:n]
        out[2] = -0x2BADBEEF  # a wrong value that happens to be the first fill

    check, _ = check_with(problem, writes_the_fill)
    assert not check.ok and check.first_mismatch_index == [2]
    assert "Never written" not in check.message


BF16_ARGS = """\
[[args]]
name = "x"
dtype = "bfloat16"
shape = ["n"]
role = "in"

[[args]]
name = "out"
dtype = "bfloat16"
shape = ["n"]
role = "out"

[[args]]
name = "n"
dtype = "int32"
role = "param"
"""

BF16_REFERENCE = """\
def generate(params, draw):
    return {"x": draw.uniform(int(params["n"]), 0.5, 8.0, "bfloat16")}


def reference(inputs, params):
    return {"out": inputs["x"].astype("float64") * 2.0}
"""


def test_a_bfloat16_problem_gets_the_default_tolerance_and_numba_gets_bits(tmp_path: Path):
    folder = write_problem(tmp_path, "bf16_double", BF16_ARGS, BF16_REFERENCE, extra="")
    problem = load_problem(folder)
    tol = problem.tolerance["bfloat16"]
    assert (tol.atol, tol.rtol) == dtypes.DEFAULT_TOLERANCES["bfloat16"]

    def doubles(x, out, n):  # adds one to the exponent: x * 2 for normal numbers
        assert x.dtype == np.uint16 and out.dtype == np.uint16
        out[:n] = x[:n] + 0x80

    assert check_with(problem, doubles)[0].ok

    def copies(x, out, n):
        out[:n] = x[:n]

    assert not check_with(problem, copies)[0].ok


def test_a_tolerance_for_an_exact_type_is_refused(tmp_path: Path):
    extra = "[tolerance.int32]\natol = 0.5\nrtol = 0\n"
    folder = write_problem(tmp_path, "int_copy", INT_ARGS, INT_REFERENCE, extra=extra)
    with pytest.raises(ProblemLoadError, match="compared exactly") as err:
        load_problem(folder)
    assert err.value.field == "tolerance.int32"
