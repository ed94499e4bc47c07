"""The memo of generated inputs and reference outputs (see kernels.check)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np


class Memo:
    """Generated inputs and reference outputs, kept for the next run of the same case.

    Both are pure functions of (problem, case parameters, seed), so a warm process that
    evaluates the same case on the same seed again reuses them instead of drawing and
    computing tens of millions of numbers again. Only public seeds come back (a reader
    asking to see a failing case again, RunJob.public_seeds); a real run's seeds are
    secret and drawn per run (kernels.seeds), and its entries are never kept. Entries
    are frozen (read-only arrays): nothing downstream may write to them. Bounded by
    KPLAY_ENGINE_MEMO_MB (default 1024; 0 switches it off), least recently used first
    out; an entry larger than half the budget is never kept.
    """

    def __init__(self) -> None:
        self._entries: OrderedDict[tuple[Any, ...], tuple[dict[str, Any], int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @staticmethod
    def budget() -> int:
        from kplay.config import EngineSettings

        return EngineSettings().memo_budget_bytes

    def get(self, key: tuple[Any, ...]) -> dict[str, Any] | None:
        with self._lock:
            hit = self._entries.get(key)
            if hit is None:
                return None
            self._entries.move_to_end(key)
            return dict(hit[0])

    def put(self, key: tuple[Any, ...], value: dict[str, Any]) -> None:
        for v in value.values():
            if isinstance(v, np.ndarray):
                v.flags.writeable = False
        size = sum(v.nbytes for v in value.values() if isinstance(v, np.ndarray))
        budget = self.budget()
        if size > budget // 2:
            return
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = (dict(value), size)
            self._bytes += size
            while self._bytes > budget and self._entries:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped
