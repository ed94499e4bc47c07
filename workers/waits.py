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

Where a time limit is known, it counts as one more duration of every kind: a mean of a short
record misses the rare run that holds its worker to the limit (on a load test's first class,
such runs were 11% of the runs and half the mean duration, and none was among the first 20
to end), and the one extra duration costs a long record little.

A job's kind is its (problem, backend), or (problem, backend, mode) where the executor knows
the mode (a check-only run is a fraction of a full one); with too few recent jobs of that
kind, its backend's, then every job's durations stand in.

A restarted server has no recent job: `Durations` then reads a prior, the durations an
earlier server kept (`save`/`load`), and counts them as older than its own until its own
have pushed them out. No recent job and no prior: no estimate.
"""

from __future__ import annotations

import heapq
import json
import os
import statistics
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

# Durations kept per kind, per backend and overall (the mean of a kind whose jobs sometimes
# run to the time limit needs a good many to settle).
KEPT = 200
# Fewer recent jobs than this of a kind: its backend's (then every job's) durations are used.
MIN_SAMPLES = 5

Kind = tuple[str, ...]  # (problem, backend) or (problem, backend, mode)
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
            known = samples(kind)
            # Any run may hold its worker to the time limit, and such runs are the last to
            # show in a short record (they end last, and are few): the limit counts as one
            # duration among the kind's, a weight that fades as the record grows.
            seen[kind] = [*known, limit_s] if known and limit_s is not None else known
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


def keys(kind: Kind) -> tuple[tuple[str, ...], ...]:
    """The sample sets a kind's duration counts in, most specific first: the kind, its
    backend (with its mode, where it has one), every job."""
    return (tuple(kind), tuple(kind[1:]), ())


def pick(*sets: Sequence[float]) -> Sequence[float]:
    """The first of these sample sets (most specific first) that holds MIN_SAMPLES, else
    the largest."""
    for found in sets:
        if len(found) >= MIN_SAMPLES:
            return found
    return max(sets, key=len)


class Durations:
    """Recent job durations, by kind, by backend and overall; safe to share between threads.

    `prior` (an earlier server's durations, `load`) counts beside this server's own, older
    than them, until `kept` of its own at a level have pushed it out: its kind's first, then
    its backend's, then every job's, the first level with MIN_SAMPLES of the two together.
    The latest `STORED` durations, the prior's first, are what `save` writes.
    """

    def __init__(self, kept: int = KEPT, prior: Durations | None = None) -> None:
        self.kept = kept
        self.prior = prior
        self._lists: dict[tuple[str, ...], deque[float]] = {}
        self._log: deque[tuple[Kind, float]] = deque(maxlen=STORED)
        if prior is not None:
            self._log.extend(prior.entries())
        self._lock = threading.Lock()

    def add(self, kind: Kind, seconds: float) -> None:
        with self._lock:
            for key in keys(kind):
                self._lists.setdefault(key, deque(maxlen=self.kept)).append(seconds)
            self._log.append((tuple(kind), seconds))

    def own(self, kind: Kind) -> list[list[float]]:
        """This server's own durations for the kind, most specific set first."""
        with self._lock:
            return [list(self._lists.get(k, ())) for k in keys(kind)]

    def samples(self, kind: Kind) -> list[float]:
        own = self.own(kind)
        if self.prior is None:
            return list(pick(*own))
        earlier = self.prior.own(kind)
        # At each level the prior's durations come first and this server's after them, the
        # latest `kept` of both: a few jobs of its own do not replace a long record (a mean
        # of few durations misses the rare job that runs to the time limit, and those that
        # end first are the short ones), many do.
        merged = [(old + new)[-self.kept :] for new, old in zip(own, earlier, strict=True)]
        return list(pick(*merged))

    def entries(self) -> list[tuple[Kind, float]]:
        """The durations `save` writes, oldest first."""
        with self._lock:
            return list(self._log)


# How many of the latest durations (all kinds) a saved file keeps.
STORED = 2000


def save(durations: Durations, path: Path) -> None:
    """Write the latest durations to `path` (JSON; replaced atomically)."""
    rows = [[*kind, round(seconds, 3)] for kind, seconds in durations.entries()]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(json.dumps({"version": 1, "durations": rows}))
    os.replace(tmp, path)


def load(path: Path, kept: int = KEPT) -> Durations | None:
    """The durations saved in `path`, or None where there are none or they cannot be read."""
    try:
        rows = json.loads(path.read_text())["durations"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    found = Durations(kept)
    for row in rows if isinstance(rows, list) else ():
        if not (isinstance(row, list) and len(row) >= 3):
            continue
        *kind, seconds = row
        if all(isinstance(k, str) for k in kind) and isinstance(seconds, int | float):
            if seconds >= 0:
                found.add(tuple(kind), float(seconds))
    return found if found.entries() else None
