"""Outputs compared exactly (integers, bool, packed 4-bit integers), and the second fill.

Every bit pattern of an integer is a legal value, so no fill of an integer output can be
told from data by looking at one launch: a kernel that never writes an element whose
expected value happens to equal the fill would pass. The checker therefore uses two
fills (kernels.arrays.INT_FILL_BITS, then every bit flipped):

- the first launch runs on outputs holding the first fill, and is compared exactly;
- when it passes but some expected element equals the first fill (so that element may
  never have been written), or when it fails with elements still holding the fill, the
  case is launched once more on outputs holding the second fill;
- an element is never written only if it held the first fill after the first launch and
  the second fill after the second. Since the two fills differ in every bit, an unwritten
  element fails at least one of the two launches whatever its expected value.

A bool output needs one launch: it starts as the byte 0x5A, which is neither false (0)
nor true (1), and bools are compared byte for byte. Packed 4-bit floats (float4_e2m1x2)
are unpacked and compared within a tolerance; their fills' values (3 and -1 in each
nibble's turn) are too far apart for one expected value to pass both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kplay.kernels import dtypes
from kplay.kernels.arrays import poison_value, to_numpy
from kplay.kernels.diagnose import at, grid, out_of_place
from kplay.kernels.draws import array_module


def declared(tol: Any) -> dtypes.DType | None:
    name = getattr(tol, "dtype", None)
    return dtypes.get(name) if name else None


def is_exact(tol: Any) -> bool:
    info = declared(tol)
    return info is not None and info.exact


def on_host_only(tol: Any) -> bool:
    """Exact and packed types are compared on the host, by this module and compare()."""
    info = declared(tol)
    return info is not None and (info.exact or info.kind == "packed")


def host_compare(tol: Any) -> bool:
    """Compared on the host even on a GPU: the exact and packed types, and bfloat16 and
    float8, which CuPy holds only as their bits."""
    info = declared(tol)
    return on_host_only(tol) or (info is not None and info.extension)


def needs_second_fill(name: str) -> bool:
    """Types with no spare bit pattern: the integers and the packed types."""
    return dtypes.get(name).kind in ("int", "packed")


def unpacked(got: Any, expected: Any, tol: Any) -> tuple[Any, Any]:
    """For a packed type, both arrays unpacked to their values (last axis doubled)."""
    info = declared(tol)
    if info is None or info.kind != "packed":
        return got, expected
    return dtypes.unpack4(got, info.name), dtypes.unpack4(expected, info.name)


def _same(got: Any, expected: Any, info: dtypes.DType) -> Any:
    """Elementwise equality of an exact output; bools byte for byte (0x5A is not true)."""
    xp = array_module(got, expected)
    got, expected = xp.asarray(got), xp.asarray(expected)
    if info.kind == "bool":
        return got.view(xp.uint8) == expected.astype(xp.bool_).view(xp.uint8)
    return got == expected


def count(got: Any, expected: Any, tol: Any) -> tuple[int, int, int]:
    """(wrong elements, of which holding the first fill, flat index of the first or -1)."""
    info = declared(tol)
    assert info is not None
    if tuple(got.shape) != tuple(expected.shape):
        return int(got.size) or 1, 0, 0
    got, expected = unpacked(got, expected, tol)
    if info.float_values:  # float4_e2m1x2, within its tolerance
        xp = array_module(got, expected)
        g, e = got.astype(xp.float64), xp.asarray(expected).astype(xp.float64)
        bad = ~(xp.abs(g - e) <= tol.atol + tol.rtol * xp.abs(e))
    else:
        bad = ~_same(got, expected, info)
    nbad = int(bad.sum())
    if not nbad:
        return 0, 0, -1
    fill = holds_fill(got, info)
    return nbad, int((bad & fill).sum()), int(to_numpy(bad.reshape(-1).argmax()))


def compare_ok() -> dict[str, Any]:
    return {"ok": True, "max_abs_err": 0.0, "max_rel_err": 0.0, "mismatches": 0}


def holds_fill(got: Any, info: dtypes.DType, second: bool = False) -> Any:
    """Where `got` (unpacked, for a packed type) holds the first (or second) fill."""
    xp = array_module(got)
    value = poison_value(info.storage, second)
    if info.kind == "bool":
        return xp.asarray(got).view(xp.uint8) == int(value)
    if info.kind == "packed":
        fill = xp.full(got.shape[:-1] + (got.shape[-1] // 2,), int(value), dtype=xp.uint8)
        return dtypes.unpack4(fill, info.name) == got
    return xp.asarray(got) == value


def _text(value: Any, info: dtypes.DType) -> str:
    if info.kind == "bool":
        byte = int(np.asarray(value).view(np.uint8))
        return {0: "false", 1: "true"}.get(byte, f"the byte 0x{byte:02X}")
    return str(int(value))


def compare(
    name: str,
    got: Any,
    expected: Any,
    tol: Any,
    unwritten: np.ndarray | None = None,
) -> dict[str, Any]:
    """compare() (kernels.check) for an exact type. `unwritten`, from two launches with
    the two fills, marks the elements known never written; without it, an element that
    holds the first fill may be unwritten or written with that value, and is worded so."""
    info = declared(tol)
    assert info is not None
    got, expected = to_numpy(got), to_numpy(expected)
    if tuple(got.shape) != tuple(expected.shape):
        return {"ok": False, "message": f"{name} has shape {got.shape}, expected {expected.shape}"}
    got, expected = unpacked(got, expected, tol)
    bad = ~np.asarray(_same(got, expected, info))
    nbad = int(bad.sum())
    if nbad == 0:
        return compare_ok()
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), bad.shape))
    g, e = got[idx], expected[idx]
    packed = f" (counting unpacked {info.name} values)" if info.kind == "packed" else ""
    text = (
        f"{at(name, idx)}: expected {_text(e, info)}, got {_text(g, info)}; "
        f"{nbad} of {bad.size} elements wrong{packed}."
    )
    suspects = bad & (np.asarray(holds_fill(got, info)) if unwritten is None else unwritten)
    text += _fill_words(name, info, suspects, idx, unwritten is not None)
    other = bad & ~suspects
    if not suspects[idx] and info.kind != "bool":
        with np.errstate(invalid="ignore"):
            got64, exp64 = got.astype(np.float64), expected.astype(np.float64)
        placed = out_of_place(name, got64, exp64, other, tol)
        if placed:
            text += f" {placed}"
    result: dict[str, Any] = {
        "ok": False,
        "mismatches": nbad,
        "first_mismatch_index": list(idx),
        "message": text,
    }
    if info.kind != "bool":
        result["expected"], result["got"] = float(e), float(g)
    if bad.ndim == 2:
        result["grid"] = grid(name, bad, suspects, np.zeros_like(bad), idx)
    return result


def _fill_words(
    name: str, info: dtypes.DType, suspects: np.ndarray, idx: tuple[int, ...], known: bool
) -> str:
    count = int(suspects.sum())
    if not count:
        return ""
    first = tuple(int(i) for i in np.unravel_index(int(np.argmax(suspects)), suspects.shape))
    who = at(name, first) if count == 1 else f"{at(name, first)} and {count - 1} more"
    fill = poison_value(info.storage)
    if info.kind == "bool":
        return (
            f" Never written: {who} still hold{'s' if count == 1 else ''} the byte 0x5A the "
            f"harness filled {name} with, which is neither false (0) nor true (1)."
        )
    bits = int(np.asarray(fill).view(f"uint{8 * info.storage.itemsize}"))
    first_fill = f"{int(fill)} (0x{bits:0{2 * info.storage.itemsize}X})"
    if known:
        second = int(poison_value(info.storage, second=True))
        return (
            f" Never written: {who} held the fill in both launches ({first_fill} in the "
            f"first, {second} in the second, every bit flipped)."
        )
    return (
        f" {who} still hold{'s' if count == 1 else ''} {first_fill}, the value the harness "
        f"filled {name} with before the launch: never written, or written with that value."
    )


def fill_passes(expected: Any, tol: Any) -> bool:
    """Whether an output still holding the first fill would match `expected` somewhere
    (so that one launch cannot show every element was written)."""
    info = declared(tol)
    if info is None or not needs_second_fill(info.name):
        return False
    xp = array_module(expected)
    filled = xp.full(expected.shape, poison_value(info.storage), dtype=info.storage)
    if info.kind == "packed" and info.float_values:
        g, e = unpacked(filled, expected, tol)
        g64, e64 = g.astype(xp.float64), e.astype(xp.float64)
        return bool((xp.abs(g64 - e64) <= tol.atol + tol.rtol * xp.abs(e64)).any())
    return bool((filled == xp.asarray(expected)).any())


def second_fill(
    check: Any,
    problem: Any,
    prepared: Any,
    ops: Any,
    launch: Callable[[list[Any]], None],
    expected: dict[str, Any],
) -> Any:
    """The second launch (module docstring) where one launch could not settle a case."""
    from kplay.kernels.check import reset_outputs, verify

    names = [n for n in prepared.poisoned if needs_second_fill(problem.arg(n).dtype)]
    tols = {n: problem.tolerance[problem.arg(n).dtype] for n in names}
    if check.ok:
        if not any(fill_passes(expected[n], tols[n]) for n in names):
            return check
    elif check.output not in names or "filled" not in (check.message or ""):
        return check
    firsts = {n: ops.to_host(prepared.device[n]) for n in names}
    reset_outputs(prepared, ops, problem)
    for n in names:
        storage = dtypes.get(problem.arg(n).dtype).storage
        ops.fill(prepared.device[n], poison_value(storage, second=True))
    launch(prepared.args)
    ops.synchronize()
    again = verify(problem, prepared, ops, expected)
    if not again.ok and again.output in names:
        n = again.output
        info = dtypes.get(problem.arg(n).dtype)
        second = ops.to_host(prepared.device[n])
        first_u, second_u = unpacked(firsts[n], second, tols[n])
        unwritten = np.asarray(holds_fill(first_u, info)) & np.asarray(
            holds_fill(second_u, info, second=True)
        )
        worded = compare(n, second, expected[n], tols[n], unwritten=unwritten)
        again = again.model_copy(update={k: v for k, v in worded.items() if k != "ok"})
        again = again.model_copy(update={"message": f"Second launch: {again.message}"})
    # What the first launch left is put back, for any later look at this case's outputs.
    for n, first in firsts.items():
        ops.copy_from_host(prepared.device[n], first)
    return check if again.ok else again
