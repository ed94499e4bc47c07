"""Checking one case: fresh seeded inputs, NaN-poisoned outputs, inputs compared after.

The harness never trusts the kernel: inputs are cloned before the launch and compared
after it, outputs start as NaN (or zero when the problem says the kernel accumulates),
and every element is compared against the reference within the problem's tolerance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kplay.kernels import dtypes, exact, formula
from kplay.kernels.arrays import ArrayOps, poison_value, scalar, to_numpy
from kplay.kernels.contract import ProblemError, check_inputs, check_outputs
from kplay.kernels.diagnose import at, diagnose, number, race
from kplay.kernels.draws import Draws, array_module, on_device
from kplay.kernels.memo import Memo
from kplay.kernels.models import CaseCheck
from kplay.kernels.problem import Case, ProblemSpec, Tolerance

# The problem's generator or reference broke its own contract (a bug in the problem
# folder, reported as such: kernels.contract).
InputError = ProblemError


# A case whose arrays take at least this many bytes lives on the GPU for a GPU backend:
# its inputs are drawn there, its reference computed there and its outputs compared
# there, so nothing of its size crosses the bus. Smaller cases (the checker's edge
# cases) keep the float64 reference on the host; both draw the same numbers.
DEVICE_CASE_MIN_BYTES = 4 << 20


def array_bytes(problem: ProblemSpec, params: dict[str, Any]) -> int:
    """Bytes one case's arrays hold: its inputs and outputs (not its traffic, `bytes`)."""
    total = 0
    for arg in problem.args:
        if arg.is_array:
            count = 1
            for dim in arg.shape:
                count *= formula.evaluate_int(dim, params)
            total += count * dtypes.get(arg.dtype).storage.itemsize
    return total


def home_module(problem: ProblemSpec, params: dict[str, Any], ops: ArrayOps) -> Any:
    """Where a case's inputs, reference outputs and comparisons live: cupy or numpy (always
    numpy for bfloat16 and float8 arrays, which CuPy cannot hold)."""
    if any(a.is_array and dtypes.get(a.dtype).extension for a in problem.args):
        return np
    if ops.on_gpu and array_bytes(problem, params) >= DEVICE_CASE_MIN_BYTES:
        import cupy

        return cupy
    return np


@dataclass
class PreparedCase:
    """Inputs as drawn (the case's home arrays: NumPy, or CuPy for a large case on a GPU),
    device arguments in kernel order, and the names of each output."""

    case: Case
    host_inputs: dict[str, Any]
    device: dict[str, Any]
    args: list[Any]
    zero_init: list[str] = field(default_factory=list)
    poisoned: list[str] = field(default_factory=list)
    # The seed host_inputs were generated from: with the case, it names them (see Memo).
    seed: int = 0


MEMO = Memo()


def _memo_key(
    kind: str, problem: ProblemSpec, params: dict[str, Any], seed: int, where: str = "numpy"
) -> tuple:
    frozen = tuple(sorted((k, repr(v)) for k, v in params.items()))
    return (kind, problem.slug, id(problem.reference), frozen, seed, where)


def _where(arrays: dict[str, Any]) -> str:
    return array_module(*arrays.values()).__name__


def expected_outputs(
    problem: ProblemSpec,
    params: dict[str, Any],
    seed: int,
    inputs: dict[str, Any],
    memoise: bool = True,
) -> dict[str, Any]:
    """The reference's outputs for the inputs generated from `seed`.

    Memoised only when `memoise` says the seed can come back (a public seed): a secret
    seed is drawn once, and its entries would only push useful ones out of the memo.
    """
    key = _memo_key("out", problem, params, seed, _where(inputs))
    hit = MEMO.get(key) if memoise else None
    if hit is not None:
        return hit
    out = problem.reference.reference(dict(inputs), dict(params))
    check_outputs(problem, params, out)
    if memoise:
        MEMO.put(key, out)
    return dict(out)


def shape_of(problem: ProblemSpec, name: str, params: dict[str, int | float]) -> tuple[int, ...]:
    return tuple(formula.evaluate_int(d, params) for d in problem.arg(name).shape)


def generate_inputs(
    problem: ProblemSpec, params: dict[str, Any], seed: int, memoise: bool = True, xp: Any = np
) -> dict[str, Any]:
    """The case's inputs drawn from `seed` as `xp` arrays (kernels.draws); memoised where
    `memoise` (read-only then)."""
    key = _memo_key("in", problem, params, seed, xp.__name__)
    hit = MEMO.get(key) if memoise else None
    if hit is not None:
        return hit
    inputs = _generate(problem, params, seed, xp)
    if memoise:
        MEMO.put(key, inputs)
    return dict(inputs)


def _generate(problem: ProblemSpec, params: dict[str, Any], seed: int, xp: Any) -> dict[str, Any]:
    inputs = problem.reference.generate(dict(params), Draws(seed, xp))
    check_inputs(problem, params, inputs)
    for arg in problem.inputs:
        if arg.is_array:
            if array_module(inputs[arg.name]) is not xp:
                raise InputError(
                    f"{problem.slug}: generate() returned {arg.name!r} outside the arrays "
                    "its Draws gives (draw every array with draw.uniform/draw.normal)"
                )
            arr = xp.ascontiguousarray(inputs[arg.name], dtype=dtypes.get(arg.dtype).storage)
            expected = shape_of(problem, arg.name, params)
            if arr.shape != expected:
                raise InputError(
                    f"{problem.slug}: {arg.name} has shape {arr.shape}, not {expected}"
                )
            inputs[arg.name] = arr
    return inputs


def prepare(
    problem: ProblemSpec,
    case: Case,
    ops: ArrayOps,
    seed: int,
    memoise: bool = True,
    host: dict[str, Any] | None = None,
) -> PreparedCase:
    """Device arguments for `case`: inputs drawn from `seed` (or `host`), poisoned outputs."""
    params = dict(case.params)
    if host is None:
        host = generate_inputs(problem, params, seed, memoise, home_module(problem, params, ops))
    prepared = PreparedCase(case=case, host_inputs=host, device={}, args=[], seed=seed)
    for arg in problem.args:
        if arg.role == "param":
            prepared.args.append(scalar(params[arg.name], arg.dtype))
            continue
        if arg.role == "scalar":
            prepared.args.append(scalar(host[arg.name], arg.dtype))
            continue
        if arg.role in ("in", "inout"):
            dev = ops.to_device(host[arg.name])
        else:
            zeros = arg.init == "zeros"
            dev = ops.empty_like_poisoned(
                shape_of(problem, arg.name, params), dtypes.get(arg.dtype).storage, zeros
            )
            (prepared.zero_init if zeros else prepared.poisoned).append(arg.name)
        prepared.device[arg.name] = dev
        prepared.args.append(ops.for_kernel(dev))
    return prepared


def reset_outputs(prepared: PreparedCase, ops: ArrayOps, problem: ProblemSpec) -> None:
    """Before a launch: re-poison outputs, zero accumulators, restore inout inputs."""
    for name in prepared.zero_init:
        ops.fill(prepared.device[name], 0)
    for name in prepared.poisoned:
        arg = problem.arg(name)
        ops.fill(prepared.device[name], poison_value(dtypes.get(arg.dtype).storage))
    for arg in problem.args:
        if arg.role == "inout":
            ops.copy_from_host(prepared.device[arg.name], prepared.host_inputs[arg.name])


def compare(
    name: str,
    got: np.ndarray,
    expected: np.ndarray,
    tol: Tolerance,
    inputs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Elementwise |got - expected| <= atol + rtol * |expected|; NaN never passes.

    Written with in-place operations: on a large benchmark case this runs after every
    timed run, and its passes over memory are most of the re-check's cost. A mismatch is
    worded by kernels.diagnose (`inputs`, the case's inputs, help it name a cause).
    """
    if exact.is_exact(tol):  # integers, bool: compared exactly (kernels.exact)
        return exact.compare(name, got, expected, tol)
    got, expected = exact.unpacked(to_numpy(got), to_numpy(expected), tol)
    # The poison is a signalling NaN: widening it raises the invalid flag, not an error.
    with np.errstate(invalid="ignore"):
        got64 = np.asarray(got, dtype=np.float64)
    exp64 = np.asarray(to_numpy(expected), dtype=np.float64)
    if got64.shape != exp64.shape:
        return {"ok": False, "message": f"{name} has shape {got64.shape}, expected {exp64.shape}"}
    diff = np.subtract(got64, exp64)
    np.abs(diff, out=diff)
    scale = np.abs(exp64)
    bound = scale * tol.rtol
    bound += tol.atol
    with np.errstate(invalid="ignore"):
        bad = ~(diff <= bound)
    nbad = int(np.count_nonzero(bad))
    if nbad == 0:
        max_abs = float(diff.max()) if diff.size else 0.0
        np.maximum(scale, 1e-30, out=scale)
        np.divide(diff, scale, out=scale)
        max_rel = float(scale.max()) if scale.size else 0.0
        return {"ok": True, "max_abs_err": max_abs, "max_rel_err": max_rel, "mismatches": 0}
    finite = np.isfinite(diff)
    worst_abs = float(diff[finite].max()) if finite.any() else None
    rel = diff[finite] / np.maximum(scale[finite], 1e-30)
    worst_rel = float(rel.max()) if rel.size else None
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), bad.shape))
    g, e = float(got64[idx]), float(exp64[idx])
    found = diagnose(name, np.asarray(got), got64, exp64, bad, tol, inputs)
    told = f" {found.text}" if found.text else ""
    ints = np.asarray(got).dtype.kind in "iu"
    return {
        "ok": False,
        "max_abs_err": worst_abs,
        "max_rel_err": worst_rel,
        "mismatches": nbad,
        "first_mismatch_index": [int(i) for i in idx],
        "expected": e,
        "got": g,
        "message": (
            f"{at(name, idx)}: expected {number(e, ints)}, got {number(g, ints)}; "
            f"{nbad} of {bad.size} elements wrong.{told}"
        ),
        "grid": found.grid,
    }


# Outputs at least this large are compared where they are, on the GPU: the same test as
# compare(), without bringing the output back and looping over it on one CPU core.
DEVICE_COMPARE_MIN = 1 << 20


# Host outputs at least this large are judged in one compiled pass (kernels.repcheck)
# instead of compare()'s several passes over float64 copies; compare() words a failure.
HOST_ONE_PASS_MIN = 1 << 16


def _elements(dev: Any) -> int:
    numel = getattr(dev, "numel", None)  # torch
    return int(numel()) if callable(numel) else int(getattr(dev, "size", 0))


def compare_on_device(got: Any, expected: np.ndarray, tol: Tolerance) -> dict[str, Any] | None:
    """compare() for a CuPy array; None when the elements disagree or the shapes differ.

    A mismatch is then looked at again on the host by compare(), which words the message.
    `expected` is a CuPy array for a case that lives on the GPU; a NumPy one is copied over.
    """
    import cupy

    if tuple(got.shape) != tuple(expected.shape) or exact.host_compare(tol):
        return None  # exact and packed types are compared on the host (kernels.exact)
    exp = cupy.asarray(expected).astype(cupy.float64)
    diff = got.astype(cupy.float64)
    diff -= exp
    cupy.abs(diff, out=diff)
    scale = cupy.abs(exp, out=exp)
    bound = scale * tol.rtol
    bound += tol.atol
    if int(cupy.count_nonzero(~(diff <= bound))):
        return None
    if diff.size == 0:
        return {"ok": True, "max_abs_err": 0.0, "max_rel_err": 0.0, "mismatches": 0}
    max_abs = float(diff.max())
    cupy.maximum(scale, 1e-30, out=scale)
    cupy.divide(diff, scale, out=scale)
    return {"ok": True, "max_abs_err": max_abs, "max_rel_err": float(scale.max()), "mismatches": 0}


def _inputs_intact(ops: ArrayOps, dev: Any, drawn: Any) -> bool:
    """On the GPU: the kernel's input buffer still equals the inputs as drawn."""
    import cupy

    return bool(cupy.array_equal(ops.as_cupy(dev), drawn))


def verify(
    problem: ProblemSpec, prepared: PreparedCase, ops: ArrayOps, expected: dict[str, Any]
) -> CaseCheck:
    """Compare outputs with the reference and inputs with their clones."""
    case = prepared.case
    for arg in problem.args:
        if arg.role != "in":
            continue
        drawn = prepared.host_inputs[arg.name]
        if on_device(drawn) and _inputs_intact(ops, prepared.device[arg.name], drawn):
            continue
        after = dtypes.as_declared(ops.view_on_host(prepared.device[arg.name]), arg.dtype)
        drawn = to_numpy(drawn)
        # Generated inputs hold no NaN, so plain equality also catches a NaN written back.
        if not np.array_equal(after, drawn):
            idx = np.argwhere(after != drawn)
            where = f" (first at {idx[0].tolist()})" if len(idx) else ""
            return CaseCheck(
                name=case.name,
                params=case.params,
                ok=False,
                output=arg.name,
                message=f"the kernel wrote its input {arg.name!r}{where}; inputs are read-only",
            )
    worst: dict[str, Any] | None = None
    for arg in problem.outputs:
        dev = prepared.device[arg.name]
        tol = problem.tolerance[arg.dtype]
        result = None
        on_gpu = ops.on_gpu and not exact.host_compare(tol)
        if on_gpu and (on_device(expected[arg.name]) or _elements(dev) >= DEVICE_COMPARE_MIN):
            result = compare_on_device(ops.as_cupy(dev), expected[arg.name], tol)
        elif not ops.on_gpu and _elements(dev) >= HOST_ONE_PASS_MIN:
            from kplay.kernels.repcheck import errors_on_host

            got = dtypes.as_declared(ops.view_on_host(dev), arg.dtype)
            result = errors_on_host(got, expected[arg.name], tol)
        if result is None:
            got = dtypes.as_declared(ops.to_host(dev), arg.dtype)
            result = compare(arg.name, got, expected[arg.name], tol, prepared.host_inputs)
        result["output"] = arg.name
        if not result["ok"]:
            return CaseCheck(name=case.name, params=case.params, **result)
        if worst is None or (result.get("max_abs_err") or 0) > (worst.get("max_abs_err") or 0):
            worst = result
    assert worst is not None
    return CaseCheck(name=case.name, params=case.params, **worst)


def run_case(
    problem: ProblemSpec,
    case: Case,
    ops: ArrayOps,
    launch: Callable[[list[Any]], None],
    seed: int,
    memoise: bool = True,
) -> tuple[CaseCheck, PreparedCase]:
    prepared = prepare(problem, case, ops, seed, memoise)
    launch(prepared.args)
    ops.synchronize()
    expected = expected_outputs(problem, dict(case.params), seed, prepared.host_inputs, memoise)
    check = verify(problem, prepared, ops, expected)
    check = exact.second_fill(check, problem, prepared, ops, launch, expected)
    if not check.ok and check.output in {arg.name for arg in problem.outputs}:
        check = _race_or(check, problem, prepared, ops, launch)
    return check, prepared


def _race_or(
    check: CaseCheck,
    problem: ProblemSpec,
    prepared: PreparedCase,
    ops: ArrayOps,
    launch: Callable[[list[Any]], None],
) -> CaseCheck:
    """A wrong case is launched once more on the same inputs: when the two outputs differ
    by more than the tolerance, the answer depends on the order threads ran in, and the
    verdict says so (a race) before what the first launch got wrong."""
    name = check.output
    assert name is not None
    first = ops.to_host(prepared.device[name])
    reset_outputs(prepared, ops, problem)
    launch(prepared.args)
    ops.synchronize()
    second = ops.to_host(prepared.device[name])
    tol = problem.tolerance[problem.arg(name).dtype]
    told = race(name, first, second, tol)
    if told is None:
        return check
    return check.model_copy(update={"message": f"{told} First launch: {check.message}"})
