"""Where a run that was only compiled could have been checked: the same exercise in a
backend that some machine serving this server can run or simulate.

A CUDA C++ run on a machine without an NVIDIA GPU ends `compiled`; when the cell also
offers Numba CUDA (Numba's simulator) or Triton (its interpreter), the card offers that
tab instead, so a reader without a GPU still learns whether their idea is right.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kplay.app.services.problems import backend_title

# What a capability lets the card promise, in the reader's words.
_HOW = {
    "run": "runs here",
    "simulate": "checked here in a simulator (slow, no timing)",
}


@dataclass(frozen=True)
class Elsewhere:
    key: str
    title: str
    how: str


def capabilities(devices: Iterable[dict[str, Any]]) -> dict[str, str]:
    """The best capability any listed device reports per backend ("run" beats "simulate")."""
    best: dict[str, str] = {}
    rank = {"run": 2, "simulate": 1}
    for device in devices:
        for key, cap in (device.get("backends") or {}).items():
            if rank.get(cap, 0) > rank.get(best.get(key, ""), 0):
                best[key] = cap
    return best


def check_elsewhere(
    backend: str, offered: Iterable[str], devices: Iterable[dict[str, Any]]
) -> list[Elsewhere]:
    """The cell's other backends that can be checked here, best first."""
    caps = capabilities(devices)
    found = [
        Elsewhere(key, backend_title(key), _HOW[caps[key]])
        for key in offered
        if key != backend and caps.get(key) in _HOW
    ]
    return sorted(found, key=lambda e: e.how != _HOW["run"])
