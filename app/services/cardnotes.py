"""The card's notes on what a run did not do (untimed, compiled only), worded so that the
verdict, the note and the engine's message do not say the same thing twice."""

from __future__ import annotations

from kplay.kernels.models import RunResult


def untimed_label(result: RunResult) -> str | None:
    timing = result.timing
    if timing is not None and timing.timed:
        return None
    kind = result.system.kind if result.system else None
    reason = (timing.untimed_reason if timing else None) or ""
    if kind == "simulator":
        base = "Untimed (simulated)"
    elif kind == "compile-only" or (result.check is None and result.compile and result.compile.ok):
        base = "Compiled, not run"
    elif reason:
        base = "Untimed"
    else:
        return None
    if not reason:
        return base
    if _norm(reason).startswith(_norm(base)):
        return reason[0].upper() + reason[1:]
    return f"{base}: {reason}"


def _norm(text: str) -> str:
    return " ".join(text.lower().split()).strip(" .")


def says_nothing_new(message: str, *known: str | None) -> bool:
    """True when `message` only repeats the verdict and the untimed note."""
    rest = _norm(message)
    for text in sorted((t for t in known if t), key=len, reverse=True):  # longest first
        rest = rest.replace(_norm(text), "")
    rest = rest.replace("untimed", "")
    return not rest.strip(" .:;,()")
