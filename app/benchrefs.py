"""Measured figures in the book come from files, never from the prose.

A chapter writes `[[bench:<file>.<row>.<field>]]`; the page shows the value of that field
in `bench/results/<file>.json`, written by a benchmark script on the device it measured.
A missing file, row or field reads "(not yet measured)" rather than a guess.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

PLACEHOLDER = re.compile(r"\[\[bench:([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\]\]")
MISSING = "(not yet measured)"

_CACHE: dict[Path, tuple[float, dict[str, Any]]] = {}


def _load(path: Path) -> dict[str, Any] | None:
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return None
    hit = _CACHE.get(path)
    if hit and hit[0] == mtime:
        return hit[1]
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    _CACHE[path] = (mtime, data)
    return data


def format_value(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return MISSING if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        size = abs(value)
        if size >= 100:
            return f"{value:,.0f}"
        if size >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value)


def lookup(results_dir: Path, file: str, row: str, field: str) -> str:
    data = _load(results_dir / f"{file}.json")
    if data is None:
        return MISSING
    record = data.get(row)
    if not isinstance(record, dict) or field not in record:
        return MISSING
    return format_value(record[field])


def fill(text: str, results_dir: Path) -> str:
    """Replace every placeholder in a chapter's Markdown with its recorded value."""
    if "[[bench:" not in text:
        return text
    return PLACEHOLDER.sub(lambda m: lookup(results_dir, *m.groups()), text)
