"""When a queued job should start: the wait estimate a run card shows.

Jobs of different kinds take very different times (a wrong numba-cpu kernel is refused in a
second, a correct one is compiled, checked and timed in several, one that never ends holds
its worker until the time limit), so the estimate looks at what is actually ahead of the job:

- each job running now frees its worker after its *remaining* time: the mean, over recent
  jobs of its kind that ran longer than it has run so far, of how much longer they ran
  (a job past every recent one of its kind is taken to run to the time limit);
- each job queued ahead then takes the first worker to come free, for the mean duration of
  recent jobs of its kind;
- the job starts when, after all of them are placed, the first worker comes free.

A job's kind is its (problem, backend); with too few recent jobs of that kind, its backend's,
then every job's durations stand in. No recent job at all: no estimate.
"""

from __future__ import annotations

import heapq
import statistics
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence

# Durations kept per kind, per backend and overall (the mean of a kind whose jobs sometimes
# run to the time limit needs a good many to settle).
KEPT = 200
# Fewer recent jobs than this of a kind: its backend's (then every job's) durations are used.
MIN_SAMPLES = 5

Kind = tuple[str, str]  # (problem, backend)
Samples = Callable[[Kind], Sequence[float]]


def remaining_s(elapsed_s: float, samples: Sequence[float], limit_s: float | None) -> float:
    """Expected time left of a job of this kind that has run `elapsed_s` so far."""
    longer = [d for d in samples if d > elapsed_s]
    if longer:
        return statistics.fmean(longer) - elapsed_s
    if limit_s is not None:
        return max(limit_s - elapsed_s, 0.0)
    return 0.0


def start_in_s(
    running: Iterable[tuple[Kind, float]],
    ahead: Iterable[Kind],
    workers: int,
    samples: Samples,
    limit_s: float | None = None,
) -> float | None:
    """Seconds until a job behind `ahead` (in order) starts on one of `workers` workers,
    `running` ((kind, seconds run so far) each) being evaluated now; None when unknown."""
    if workers <= 0:
        return None
    # A queue holds a few kinds many times over: each kind's samples and mean, once.
    seen: dict[Kind, Sequence[float]] = {}
    means: dict[Kind, float] = {}

    def found(kind: Kind) -> Sequence[float]:
        if kind not in seen:
            seen[kind] = samples(kind)
        return seen[kind]

    free: list[float] = []
    for kind, elapsed in running:
        if not found(kind):
            return None
        free.append(remaining_s(elapsed, found(kind), limit_s))
    # More running than workers (a worker's count is stale): the soonest ones free them.
    free = sorted(free)[:workers] + [0.0] * max(0, workers - len(free))
    heapq.heapify(free)
    for kind in ahead:
        if kind not in means:
            if not found(kind):
                return None
            means[kind] = statistics.fmean(found(kind))
        soonest = heapq.heappop(free)
        heapq.heappush(free, soonest + means[kind])
    return free[0]


def pick(
    by_kind: Sequence[float], by_backend: Sequence[float], overall: Sequence[float]
) -> Sequence[float]:
    """The most specific of three sample sets that holds MIN_SAMPLES (else the largest)."""
    for found in (by_kind, by_backend):
        if len(found) >= MIN_SAMPLES:
            return found
    return overall if len(overall) >= MIN_SAMPLES else max((by_kind, by_backend, overall), key=len)


class Durations:
    """Recent job durations, by kind, by backend and overall; safe to share between threads."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self._lists: dict[tuple[str, ...], deque[float]] = {}
        self._lock = threading.Lock()

    def add(self, kind: Kind, seconds: float) -> None:
        problem, backend = kind
        with self._lock:
            for key in ((problem, backend), (backend,), ()):
                self._lists.setdefault(key, deque(maxlen=self.kept)).append(seconds)

    def samples(self, kind: Kind) -> list[float]:
        problem, backend = kind
        with self._lock:
            sets = [list(self._lists.get(k, ())) for k in ((problem, backend), (backend,), ())]
        return list(pick(*sets))
