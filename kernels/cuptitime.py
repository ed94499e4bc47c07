"""The kernels' own start and end stamps for each timed launch, from CUPTI's activity API.

CUDA events around a launch measure more than the kernel: the launch's front end between
the start event and the kernel, and the drain before the end event, a constant 2.6-3.1 µs
per launch on an H200 (bench/RESULTS.md, "The engine's time beside the kernels' own
durations"). On a 50 µs kernel that is 5%, and it is why events cannot agree with Nsight
Compute's `gpu__time_duration` within 3% on short kernels. CUPTI records each kernel's
start and end as the GPU stamped them, as Nsight Compute and Nsight Systems read them.

Which records belong to a repetition is decided by correlation, never by a kernel's name
(a learner may name a kernel like the harness's): the timer pushes an external correlation
id (the repetition's number) on its own thread just before the launch and pops it just
after, CUPTI links every CUDA API call made in between to that id, and each kernel record
carries the correlation id of the call that launched it. A repetition's time is the span
from the first of its kernels' starts to the last one's end.

`consistent` is the cross-check that keeps the events: where the kernels' span is much
shorter than the events' time, something other than kernels ran inside the launch (a
copy, a host wait, work handed to another thread), and the events stand.

Needs `cupti-python` (module `cupti`) and a GPU; `KernelStamps.open()` says None otherwise.
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Iterable, Sequence
from typing import Any

# The largest gap, events' median minus the kernels', that is still the events' own front
# end and drain: a few µs, plus a share for clock jitter on long kernels.
MAX_GAP_US = 8.0
MAX_GAP_SHARE = 0.02
BUFFER_BYTES = 8 * 1024 * 1024


def spans_us(
    kernels: Iterable[tuple[int, int, int]], links: Iterable[tuple[int, int]]
) -> dict[int, float]:
    """Per external id, µs from the first kernel's start to the last one's end.

    `kernels`: (correlation id, start ns, end ns) of each kernel record; `links`:
    (correlation id, external id) of each external-correlation record. A kernel whose
    launch was made outside every pushed id belongs to no repetition."""
    external = dict(links)
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for correlation, start, end in kernels:
        ext = external.get(correlation)
        if ext is None:
            continue
        first[ext] = min(first.get(ext, start), start)
        last[ext] = max(last.get(ext, end), end)
    return {ext: (last[ext] - first[ext]) / 1e3 for ext in first}


def consistent(events_us: Sequence[float], kernels_us: Sequence[float]) -> bool:
    """Whether the kernels' times may stand for the events': one for every repetition, and
    their median short of the events' by no more than the events' own overhead."""
    if not events_us or len(kernels_us) != len(events_us):
        return False
    events, kernels = statistics.median(events_us), statistics.median(kernels_us)
    gap = events - kernels
    return kernels > 0 and -MAX_GAP_US <= gap <= MAX_GAP_US + MAX_GAP_SHARE * events


def sort_records(
    activities: Iterable[Any], kernel_kind: int, link_kind: int
) -> tuple[list[tuple[int, int, int]], list[tuple[int, int]]]:
    """The kernel records and the external-correlation records of a completed buffer."""
    kernels, links = [], []
    for a in activities:
        if a.kind == kernel_kind:
            kernels.append((int(a.correlation_id), int(a.start), int(a.end)))
        elif a.kind == link_kind:
            links.append((int(a.correlation_id), int(a.external_id)))
    return kernels, links


class KernelStamps:
    """Collects kernel and external-correlation records while open (one at a time in a
    process: CUPTI has one set of activity callbacks)."""

    _lock = threading.Lock()
    _current: KernelStamps | None = None
    _registered = False

    def __init__(self, cupti: Any) -> None:
        self.cupti = cupti
        self.kernels: list[tuple[int, int, int]] = []
        self.links: list[tuple[int, int]] = []
        self.kinds = (
            cupti.ActivityKind.CONCURRENT_KERNEL,
            cupti.ActivityKind.EXTERNAL_CORRELATION,
            cupti.ActivityKind.DRIVER,
            cupti.ActivityKind.RUNTIME,
        )
        self.custom = cupti.ExternalCorrelationKind.CUSTOM0

    @classmethod
    def open(cls) -> KernelStamps | None:
        """Start recording; None where CUPTI is not installed, cannot start, or is taken."""
        try:
            from cupti import cupti
        except ImportError:
            return None
        if not cls._lock.acquire(blocking=False):
            return None
        stamps = cls(cupti)
        try:
            if not cls._registered:
                cupti.activity_register_callbacks(_requested, _completed)
                KernelStamps._registered = True
            KernelStamps._current = stamps
            for kind in stamps.kinds:
                cupti.activity_enable(kind)
        except Exception:  # noqa: BLE001 - a profiler holding CUPTI, no driver support
            for kind in stamps.kinds:  # those enabled before the failure
                try:
                    cupti.activity_disable(kind)
                except Exception:  # noqa: BLE001, S110 - never enabled
                    pass
            stamps._release()
            return None
        return stamps

    def push(self, rep: int) -> None:
        self.cupti.activity_push_external_correlation_id(self.custom, rep)

    def pop(self) -> None:
        self.cupti.activity_pop_external_correlation_id(self.custom)

    def spans(self) -> dict[int, float]:
        """The spans of every repetition recorded so far (the GPU must have finished them)."""
        self.cupti.activity_flush_all(1)
        return spans_us(self.kernels, self.links)

    def close(self) -> None:
        try:
            self.cupti.activity_flush_all(1)
            for kind in self.kinds:
                self.cupti.activity_disable(kind)
        finally:
            self._release()

    def _release(self) -> None:
        KernelStamps._current = None
        KernelStamps._lock.release()


def _requested() -> tuple[int, int]:
    return BUFFER_BYTES, 0


def _completed(activities: list[Any]) -> None:
    stamps = KernelStamps._current
    if stamps is None:
        return
    kernels, links = sort_records(activities, *stamps.kinds[:2])
    stamps.kernels.extend(kernels)
    stamps.links.extend(links)
