"""Small helpers the benchmark scripts share."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def commit() -> str:
    """The commit being measured: KPLAY_COMMIT when set (a device copy has no git), else git's."""
    if os.environ.get("KPLAY_COMMIT"):
        return os.environ["KPLAY_COMMIT"]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"
