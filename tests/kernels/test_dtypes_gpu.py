"""The element types on a GPU: CuPy holds bfloat16 and float8 as their bits, torch as its
own types; exact outputs and the second fill where the arrays live on the device."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kplay.kernels import dtypes
from kplay.kernels.arrays import ArrayOps, poison_value
from kplay.kernels.backends.base import ArrayKind
from kplay.kernels.catalog import load_problem
from kplay.kernels.check import run_case
from tests.kernels.problem_kit import write_problem
from tests.kernels.test_dtypes import BF16_ARGS, BF16_REFERENCE, INT_ARGS, INT_REFERENCE

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("kind", [ArrayKind.cupy, ArrayKind.torch_cuda])
@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "bool", "uint8"])
def test_device_arrays_keep_their_bits(kind: ArrayKind, name: str):
    ops = ArrayOps(kind)
    storage = dtypes.get(name).storage
    host = np.array([1.5, -2.0, 0.25, 0.0]).astype(storage)
    dev = ops.to_device(host)
    back = dtypes.as_declared(ops.to_host(dev), name)
    assert np.array_equal(back.view(np.uint8), host.view(np.uint8))
    out = ops.empty_like_poisoned((4,), storage, zeros=False)
    width = f"uint{8 * storage.itemsize}"
    bits = dtypes.as_declared(ops.to_host(out), name).view(width)
    assert (bits == np.asarray(poison_value(storage)).view(width)).all()
    assert ops.as_cupy(dev).nbytes == host.nbytes


def _run(problem, kernel, kind: ArrayKind):  # type: ignore[no-untyped-def]
    ops = ArrayOps(kind)
    check, _ = run_case(problem, problem.tests[0], ops, lambda args: kernel(*args), 1, False)
    return check


def test_a_bfloat16_case_on_cupy_is_compared_on_the_host(tmp_path: Path):
    problem = load_problem(write_problem(tmp_path, "bf16_double", BF16_ARGS, BF16_REFERENCE, ""))

    def doubles(x, out, n):  # CuPy arrays of the bits
        out[...] = x + 0x80

    assert _run(problem, doubles, ArrayKind.cupy).ok

    def copies(x, out, n):
        out[...] = x

    assert not _run(problem, copies, ArrayKind.cupy).ok


def test_the_second_fill_on_cupy(tmp_path: Path):
    problem = load_problem(write_problem(tmp_path, "int_copy", INT_ARGS, INT_REFERENCE, ""))

    def skips_five(x, out, n):
        out[:5] = x[:5]
        out[6:] = x[6:]

    check = _run(problem, skips_five, ArrayKind.cupy)
    assert not check.ok and "held the fill in both launches" in check.message


def test_a_torch_bfloat16_output_is_read_back(tmp_path: Path):
    problem = load_problem(write_problem(tmp_path, "bf16_double", BF16_ARGS, BF16_REFERENCE, ""))

    def doubles(x, out, n):
        out.copy_(x * 2)

    assert _run(problem, doubles, ArrayKind.torch_cuda).ok
