"""What generate() and reference() must return, checked against problem.toml.

A broken problem folder is the problem's fault, never the learner's: a generator that
leaves out an input, or a reference that returns a misnamed output, an array of the wrong
shape or an integer output as floats, is reported as a problem error naming reference.py
and the argument, by the loader (on the first test case), by `kplay check-problem` (on
every test case the simulators run) and by the checker itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kplay.kernels import dtypes, formula
from kplay.kernels.draws import Draws, array_module
from kplay.kernels.problem import ArgSpec, Case, ProblemSpec


class ProblemError(RuntimeError):
    """The problem folder broke its own contract (see kernels.check.InputError)."""


def _shape(arg: ArgSpec, params: Mapping[str, Any]) -> tuple[int, ...]:
    return tuple(formula.evaluate_int(d, dict(params)) for d in arg.shape)


def _dtype_problem(arg: ArgSpec, got: np.dtype, who: str) -> str | None:
    """Why an array of NumPy dtype `got` cannot stand for `arg`, or None when it can.

    Floats may come in any float type (a reference computes in float64); integers, bool
    and the packed types must come in their own type, since they are compared exactly."""
    info = dtypes.get(arg.dtype)
    if info.float_values and info.kind != "packed":
        if dtypes.is_float(got):
            return None
        want = "a float array (float64 is best)"
    elif got == info.storage:
        return None
    else:
        want = f"{info.storage.name}" + (
            " bytes, two 4-bit values each" if info.kind == "packed" else ""
        )
    what = "compared exactly" if info.exact else "packed"
    note = f"; {arg.dtype} is {what}" if info.kind != "float" else ""
    return f"{who} returned {arg.name!r} as {got.name}, and it must be {want}{note}"


def check_arrays(
    problem: ProblemSpec,
    params: Mapping[str, Any],
    got: Any,
    expected: list[ArgSpec],
    who: str,
    exact_keys: bool,
) -> None:
    """Names, shapes and dtypes of what `who` returned, against the `expected` arguments."""
    if not isinstance(got, Mapping):
        raise ProblemError(f"{problem.slug}: {who} returned {type(got).__name__}, not a dict")
    names = [a.name for a in expected]
    missing = [n for n in names if n not in got]
    if missing:
        raise ProblemError(
            f"{problem.slug}: {who} did not return {', '.join(map(repr, missing))} "
            f"(it returned {', '.join(map(repr, got)) or 'nothing'})"
        )
    extra = [k for k in got if k not in names]
    if exact_keys and extra:
        raise ProblemError(
            f"{problem.slug}: {who} returned {', '.join(map(repr, extra))}, which problem.toml "
            f"does not declare as {'an output' if 'reference' in who else 'an input'} "
            f"(expected {', '.join(map(repr, names))})"
        )
    for arg in expected:
        value = got[arg.name]
        if not arg.is_array:
            if not isinstance(value, int | float | np.integer | np.floating):
                raise ProblemError(
                    f"{problem.slug}: {who} returned the {arg.role} {arg.name!r} as "
                    f"{type(value).__name__}, not a number"
                )
            continue
        if not hasattr(value, "shape") or not hasattr(value, "dtype"):
            raise ProblemError(
                f"{problem.slug}: {who} returned {arg.name!r} as {type(value).__name__}, "
                "not an array"
            )
        want = _shape(arg, params)
        if tuple(value.shape) != want:
            raise ProblemError(
                f"{problem.slug}: {who} returned {arg.name!r} with shape {tuple(value.shape)}, "
                f"and problem.toml declares {list(arg.shape)} = {want}"
            )
        wrong = _dtype_problem(arg, np.dtype(value.dtype), f"{problem.slug}: {who}")
        if wrong:
            raise ProblemError(wrong)


def check_inputs(problem: ProblemSpec, params: Mapping[str, Any], inputs: Any) -> None:
    check_arrays(problem, params, inputs, problem.inputs, "generate()", exact_keys=True)


def check_outputs(problem: ProblemSpec, params: Mapping[str, Any], out: Any) -> None:
    check_arrays(problem, params, out, problem.outputs, "reference()", exact_keys=True)


@dataclass
class CaseReport:
    case: str
    inputs: list[str]
    outputs: list[str]


def describe(arr: Any) -> str:
    return f"{tuple(arr.shape)} {arr.dtype}" if hasattr(arr, "shape") else repr(arr)


def try_case(problem: ProblemSpec, case: Case) -> CaseReport:
    """Run generate() and reference() once on the host for `case`, and check both."""
    params = dict(case.params)
    inputs = problem.reference.generate(dict(params), Draws(case.seed, np))
    check_inputs(problem, params, inputs)
    for arg in problem.inputs:
        if arg.is_array and array_module(inputs[arg.name]) is not np:
            raise ProblemError(f"{problem.slug}: generate() returned {arg.name!r} off the host")
    out = problem.reference.reference(dict(inputs), dict(params))
    check_outputs(problem, params, out)
    return CaseReport(
        case=case.name,
        inputs=[f"{a.name}: {describe(inputs[a.name])}" for a in problem.inputs],
        outputs=[f"{a.name}: {describe(out[a.name])}" for a in problem.outputs],
    )
