"""The message for a name the caller got wrong: the closest known one, then all of them."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def unknown(what: str, name: str, known: Iterable[str]) -> str:
    """E.g. "unknown problem 'vector_addd'; did you mean 'vector_add'? Known problems: ..."."""
    names = sorted(known)
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else "."
    return f"unknown {what} {name!r}{hint} Known {what}s: {', '.join(names) or 'none'}"
