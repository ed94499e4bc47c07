"""What went wrong in a wrong output, worded for the learner.

compare() (kernels.check) calls diagnose() only once it has found elements outside the
tolerance. Each wrong element falls in one of three groups, told apart by its bits and
its value:

- never written: it still holds, bit for bit, the poison the harness filled the output
  with before the launch (kernels.arrays.poison_value);
- written as NaN or inf: a non-finite value that is not the poison;
- any other value: then the output is tested for values written out of place (the
  expected values transposed, shifted or strided), and for values that are close but
  outside the tolerance.

The first wrong element's group leads the wording; a second sentence counts the groups
when more than one is present. A race cannot be seen in one output: race() words two
outputs of the same inputs that differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from kplay.kernels.arrays import FLOAT_POISON_BITS, bits_of, poison_bits, poison_value
from kplay.kernels.dtypes import is_float

# Out-of-place tests look at this many wrong elements at most (the first ones).
SAMPLE = 2048
# ...and call a layout out of place when at least this share of them match it.
MATCH_SHARE = 0.9
# Flat offsets tried for a shift, and strides tried for a strided layout.
SHIFTS = tuple(k for k in range(-16, 17) if k)
ROW_SHIFTS = (1, 2, 3, 4)
STRIDES = (2, 3, 4, 8, 16, 32)
# Values within this many tolerances of the expected ones are "close".
CLOSE_FACTOR = 10.0
# The grid of a 2-D output: at most this many rows and columns around the first mismatch.
GRID = 8


@dataclass
class Diagnosis:
    # never written, written as NaN or inf, written out of place, tolerance, wrong values
    kind: str
    text: str
    grid: str | None = None


def at(name: str, idx: tuple[int, ...] | list[int]) -> str:
    """`out[3, 7]`: an element's name with plain integers."""
    return f"{name}[{', '.join(str(int(i)) for i in idx)}]"


def number(x: Any, integer: bool = False) -> str:
    """A value as the learner reads it: 7 significant digits, NaN, inf; all the digits of
    a value of an integer output."""
    x = float(x)
    if integer and np.isfinite(x):
        return str(int(x))
    if np.isnan(x):
        return "NaN"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.7g}"


def _short(x: float) -> str:
    return f"{float(x):.3g}"


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def poisoned_mask(got: np.ndarray) -> np.ndarray:
    """Where `got` still holds the poison: by bits where the poison is marked, else NaN."""
    dtype = np.dtype(got.dtype)
    if dtype in FLOAT_POISON_BITS or dtype.kind in "iu":
        return bits_of(got) == poison_bits(dtype)
    return np.isnan(np.asarray(got, dtype=np.float64))


def diagnose(
    name: str,
    got: np.ndarray,
    got64: np.ndarray,
    exp64: np.ndarray,
    bad: np.ndarray,
    tol: Any,
    inputs: dict[str, Any] | None = None,
) -> Diagnosis:
    """Classify the wrong elements (`bad`) of `got` (the output in its own dtype; got64 and
    exp64 are float64 copies of it and of the reference)."""
    poisoned = poisoned_mask(got) & bad
    finite = np.isfinite(got64)
    nonfinite = bad & ~finite & ~poisoned
    other = bad & finite & ~poisoned
    counts = (int(poisoned.sum()), int(nonfinite.sum()), int(other.sum()))
    flat_first = int(np.argmax(bad.reshape(-1)))
    first = tuple(int(i) for i in np.unravel_index(flat_first, bad.shape))
    if poisoned.reshape(-1)[flat_first]:
        diag = Diagnosis("never written", _never_written(name, got.dtype, first, counts[0]))
    elif nonfinite.reshape(-1)[flat_first]:
        text = _non_finite(name, got, got64, exp64, first, counts[1], inputs)
        diag = Diagnosis("written as NaN or inf", text)
    else:
        diag = _other(name, got64, exp64, other, tol)
    if sum(1 for c in counts if c) > 1:
        diag.text += " " + _mix(int(bad.sum()), counts)
    if got64.ndim == 2:
        diag.grid = grid(name, bad, poisoned, nonfinite, first)
    return diag


def _never_written(name: str, dtype: np.dtype, first: tuple[int, ...], count: int) -> str:
    what = (
        "a NaN with a marked bit pattern"
        if np.dtype(dtype).kind == "f"
        else f"the value {poison_value(dtype)}"
    )
    who = at(name, first) if count == 1 else f"{at(name, first)} and {count - 1} more"
    verb = "holds" if count == 1 else "hold"
    return (
        f"Never written: {who} still {verb} the poison the harness filled {name} with "
        f"before the launch ({what})."
    )


def _non_finite(
    name: str,
    got: np.ndarray,
    got64: np.ndarray,
    exp64: np.ndarray,
    first: tuple[int, ...],
    count: int,
    inputs: dict[str, Any] | None,
) -> str:
    g, e = float(got64[first]), float(exp64[first])
    word = number(g)
    more = (
        f" (and {_plural(count - 1, 'more NaN or inf', 'more NaNs or infs')})" if count > 1 else ""
    )
    text = f"Written as NaN or inf: the kernel stored {word} in {at(name, first)}{more}."
    dtype = np.dtype(got.dtype)
    if np.isinf(g) and np.isfinite(e):
        top = _short(ml_dtypes.finfo(dtype).max) if is_float(dtype) else "its range"
        return (
            f"{text} Overflow: the expected value is finite, so a result went past the "
            f"largest {dtype.name} ({top}), or something was divided by zero."
        )
    if _from_poison(got[first]):
        return (
            f"{text} Accumulated into the poisoned output: this NaN is the harness's poison "
            f"after arithmetic, so the kernel read {at(name, first)} before writing it. "
            "Adding to an output that was not zeroed first gives NaN (the harness fills "
            "outputs with NaN before the launch)."
        )
    cause = _exp_limits(dtype, inputs)
    if cause:
        return f"{text} {cause}"
    return (
        f"{text} NaN comes from 0 / 0, inf - inf, inf / inf or arithmetic on a NaN; adding "
        "to an output that was not zeroed first gives NaN too (the harness fills outputs "
        "with NaN before the launch)."
    )


def _from_poison(value: Any) -> bool:
    """A NaN that is the poison made quiet by arithmetic (what a CPU gives for `x + poison`;
    a GPU gives its own NaN instead, and then this cannot tell)."""
    dtype = np.dtype(value.dtype)
    if dtype not in FLOAT_POISON_BITS:
        return False
    width = 8 * dtype.itemsize
    mantissa = int(ml_dtypes.finfo(dtype).nmant)  # float16 and bfloat16 differ at one width
    quiet = 1 << (mantissa - 1)
    sign = 1 << (width - 1)
    bits = int(np.asarray(value).view(f"uint{width}"))
    return (bits & ~sign) == (FLOAT_POISON_BITS[dtype] | quiet)


def _exp_limits(dtype: np.dtype, inputs: dict[str, Any] | None) -> str | None:
    """Overflow or 0/0 where the inputs go past what exp() can take in `dtype`."""
    if not is_float(dtype) or not inputs:
        return None
    info = ml_dtypes.finfo(dtype)
    hi, lo = float(np.log(info.max)), float(np.log(info.smallest_subnormal))
    top = bottom = None
    for arr in inputs.values():
        if getattr(arr, "dtype", None) is None or np.dtype(arr.dtype).kind != "f" or not arr.size:
            continue
        a_max, a_min = float(arr.max()), float(arr.min())
        top = a_max if top is None else max(top, a_max)
        bottom = a_min if bottom is None else min(bottom, a_min)
    parts = []
    if top is not None and top > hi:
        parts.append(
            f"Overflow: the inputs reach {_short(top)}, and exp() of anything above "
            f"{_short(hi)} is inf in {dtype.name}; inf / inf and inf - inf are NaN."
        )
    if bottom is not None and bottom < lo:
        parts.append(
            f"0/0: the inputs go down to {_short(bottom)}, and exp() of anything below "
            f"{_short(lo)} is 0 in {dtype.name}; 0 / 0 is NaN."
        )
    return " ".join(parts) or None


def _other(
    name: str, got64: np.ndarray, exp64: np.ndarray, other: np.ndarray, tol: Any
) -> Diagnosis:
    """Wrong finite values: out of place, close to the tolerance, or just wrong."""
    placed = out_of_place(name, got64, exp64, other, tol)
    if placed:
        return Diagnosis("written out of place", placed)
    g, e = got64[other], exp64[other]
    diff = np.abs(g - e)
    bound = tol.atol + tol.rtol * np.abs(e)
    if diff.size and bool(np.all(diff <= CLOSE_FACTOR * bound)):
        rel = diff / np.maximum(np.abs(e), 1e-30)
        return Diagnosis(
            "tolerance",
            f"Close, but outside the tolerance: the largest errors are {_short(diff.max())} "
            f"(absolute) and {_short(rel.max())} (relative); the tolerance is "
            f"{tol.atol:g} + {tol.rtol:g} * |expected| (atol {tol.atol:g}, rtol {tol.rtol:g}).",
        )
    return Diagnosis("wrong values", "")


def out_of_place(
    name: str, got64: np.ndarray, exp64: np.ndarray, other: np.ndarray, tol: Any
) -> str | None:
    """Wording for wrong values that are the expected values at other indices, or None."""
    pos = np.flatnonzero(other.reshape(-1))[:SAMPLE]
    if pos.size < 2:
        return None
    g, e, n = got64.reshape(-1), exp64.reshape(-1), exp64.size

    def matches(src: np.ndarray, keep: np.ndarray) -> bool:
        """got at pos[keep] equals expected at src, for most of the sample."""
        if keep.sum() < max(2, pos.size // 2):
            return False
        want, have = e[src], g[pos[keep]]
        ok = np.abs(have - want) <= tol.atol + tol.rtol * np.abs(want)
        return ok.mean() >= MATCH_SHARE and np.unique(want[ok]).size >= 2

    if exp64.ndim == 2:
        rows, cols = exp64.shape
        swapped = exp64.T.reshape(-1)
        if _transposed(g, swapped, pos, tol):
            if rows == cols:
                return (
                    f"Written out of place, transposed: {name}[i, j] holds the value "
                    f"expected at {name}[j, i]."
                )
            return (
                f"Written out of place, transposed: read row by row, {name} holds the "
                f"expected {rows}x{cols} result with rows and columns swapped (as a "
                f"{cols}x{rows} matrix)."
            )
        for m in ROW_SHIFTS:
            for k in (m, -m):
                src = pos + k * cols
                keep = (src >= 0) & (src < n)
                if matches(src[keep], keep):
                    where = f"{name}[r {_sign(k)} {abs(k)}, c]"
                    return (
                        f"Written out of place, shifted by {_plural(abs(k), 'row', 'rows')}: "
                        f"{name}[r, c] holds the value expected at {where}."
                    )
    for k in SHIFTS:
        src = pos + k
        keep = (src >= 0) & (src < n)
        if matches(src[keep], keep):
            where = f"{name}[i {_sign(k)} {abs(k)}]"
            order = " (in row-major order)" if exp64.ndim > 1 else ""
            return (
                f"Written out of place, shifted by {k}: {name}[i] holds the value expected "
                f"at {where}{order}."
            )
    for s in STRIDES:
        src = pos * s
        keep = src < n
        if matches(src[keep], keep):
            return (
                f"Written out of place, strided: {name}[i] holds the value expected at "
                f"{name}[{s} * i] (flat indices)."
            )
        keep = pos % s == 0
        if matches(pos[keep] // s, keep):
            return (
                f"Written out of place, strided: {name}[{s} * i] holds the value expected "
                f"at {name}[i] (flat indices)."
            )
    return None


def _transposed(g: np.ndarray, swapped: np.ndarray, pos: np.ndarray, tol: Any) -> bool:
    want, have = swapped[pos], g[pos]
    ok = np.abs(have - want) <= tol.atol + tol.rtol * np.abs(want)
    return bool(ok.mean() >= MATCH_SHARE and np.unique(want[ok]).size >= 2)


def _sign(k: int) -> str:
    return "+" if k > 0 else "-"


def _mix(nbad: int, counts: tuple[int, int, int]) -> str:
    parts = []
    if counts[0]:
        parts.append(f"{counts[0]} never written")
    if counts[1]:
        parts.append(f"{counts[1]} NaN or inf")
    if counts[2]:
        parts.append(f"{counts[2]} other wrong values")
    listed = ", ".join(parts[:-1]) + f" and {parts[-1]}"
    return f"Of the {nbad} wrong elements: {listed}."


def grid(
    name: str,
    bad: np.ndarray,
    poisoned: np.ndarray,
    nonfinite: np.ndarray,
    first: tuple[int, ...],
) -> str:
    """A text map of up to GRID x GRID elements around the first mismatch of a 2-D output."""
    rows, cols = bad.shape
    r0 = max(0, min(first[0] - GRID // 2 + 1, rows - GRID))
    c0 = max(0, min(first[1] - GRID // 2 + 1, cols - GRID))
    r1, c1 = min(rows, r0 + GRID), min(cols, c0 + GRID)
    width = max(len(str(c1 - 1)), 1)
    label = len(str(r1 - 1))
    lines = [
        f"{name} rows {r0}-{r1 - 1}, columns {c0}-{c1 - 1} "
        "(. right, x wrong value, ? never written, ! NaN or inf written)",
        " " * (label + 1) + " ".join(str(c).rjust(width) for c in range(c0, c1)),
    ]
    for r in range(r0, r1):
        cells = []
        for c in range(c0, c1):
            mark = "."
            if poisoned[r, c]:
                mark = "?"
            elif nonfinite[r, c]:
                mark = "!"
            elif bad[r, c]:
                mark = "x"
            cells.append(mark.rjust(width))
        lines.append(f"{str(r).rjust(label)} " + " ".join(cells))
    return "\n".join(lines)


def race(name: str, first: np.ndarray, second: np.ndarray, tol: Any = None) -> str | None:
    """Wording for two outputs of one launch repeated on the same inputs that differ (a
    race: the answer depends on the order threads ran in); None if they agree.

    With a tolerance, differences inside it are not a race: float atomics may add in any
    order and round differently each time, which a correct kernel is allowed to do.
    """
    with np.errstate(invalid="ignore"):
        a = np.asarray(first, dtype=np.float64)
        b = np.asarray(second, dtype=np.float64)
    both_nan = np.isnan(a) & np.isnan(b)
    if tol is None:
        differ = ~((a == b) | both_nan)
    else:
        with np.errstate(invalid="ignore"):
            differ = ~((np.abs(a - b) <= tol.atol + tol.rtol * np.abs(b)) | both_nan)
    count = int(differ.sum())
    if not count:
        return None
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(differ)), differ.shape))
    return (
        f"Race: {name} differs between two launches on the same inputs: "
        f"{count} of {differ.size} elements changed, the first at {at(name, idx)} "
        f"({number(a[idx])} one time, {number(b[idx])} the other). A correct kernel gives "
        "the same output every time; threads that write the same element, or read one "
        "another's results without a barrier or an atomic, give answers that change from "
        "run to run."
    )
