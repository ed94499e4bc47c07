"""Progress as it happens: a per-process hub that fans each run's events out to the pages
watching that run, and the sink that feeds it.

The executor (local pool or Celery) hands every progress event and verdict to one sink.
`LiveSink` writes it to the database first, as before, and only then publishes it on the
hub, so whoever reacts to a published event (the event stream renders the card from the
database) finds the database at least as far along as the event. Each published event
carries `at`: the wall-clock time this process learned of it, taken before the database
write, so the time that write takes counts in the delay a page sees.

The hub numbers each run's events 1, 2, 3... and keeps the last few of every recent run, so
a stream that reconnects with the id of the last event it got (SSE's Last-Event-ID) is sent
what it missed. The numbers are this process's: an id from another process (or from before
a restart) carries another epoch and is not trusted, and the stream starts again from the
database's state. Nothing here knows HTTP; `app.routers.live` turns it into a stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from kplay.kernels.models import FINAL_STATES, ProgressEvent, RunResult
from kplay.workers.executor import ResultSink

FINAL = frozenset(s.value for s in FINAL_STATES)
# The order of the live states; a final state ranks after all of them.
RANK = {"queued": 0, "compiling": 1, "checking": 2, "timing": 3}


def rank(state: str) -> int:
    return RANK.get(state, len(RANK))


@dataclass(frozen=True)
class LiveEvent:
    run_id: str
    seq: int
    state: str
    detail: str | None
    at: float  # time.time() when this process learned of the event

    @property
    def final(self) -> bool:
        return self.state in FINAL


class Subscription:
    """One stream's view of one run: events pushed from any thread, awaited on one loop."""

    def __init__(self, hub: ProgressHub, run_id: str, loop: asyncio.AbstractEventLoop) -> None:
        self.hub = hub
        self.run_id = run_id
        self._loop = loop
        self._queue: asyncio.Queue[LiveEvent | None] = asyncio.Queue()

    def push(self, event: LiveEvent | None) -> None:
        """From any thread; None wakes the reader to say the hub is closing."""
        # The loop is gone when the stream's server stopped: nobody is left to tell.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._queue.put_nowait, event)

    async def next(self, timeout_s: float) -> LiveEvent | None:
        """The next event, or None after `timeout_s` without one (or when the hub closes)."""
        try:
            return await asyncio.wait_for(self._queue.get(), timeout_s)
        except TimeoutError:
            return None

    def close(self) -> None:
        self.hub.unsubscribe(self)


class ProgressHub:
    """Thread-safe: executors publish from their threads, streams subscribe from the loop."""

    def __init__(self, keep_runs: int = 2048, keep_events: int = 64) -> None:
        self.epoch = secrets.token_hex(4)
        self.keep_runs = keep_runs
        self.keep_events = keep_events
        self._lock = threading.Lock()
        self._logs: OrderedDict[str, list[LiveEvent]] = OrderedDict()
        self._seqs: dict[str, int] = {}
        self._subs: dict[str, set[Subscription]] = {}
        self._closed = threading.Event()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def publish(
        self, run_id: str, state: str, detail: str | None, at: float | None = None
    ) -> LiveEvent | None:
        """Number, keep and fan out one event; None when it came after the run's verdict
        (as in the database, a late event never reopens a finished run)."""
        with self._lock:
            log = self._logs.get(run_id)
            if log and log[-1].final:
                return None
            seq = self._seqs.get(run_id, 0) + 1
            event = LiveEvent(run_id, seq, state, detail, time.time() if at is None else at)
            self._seqs[run_id] = seq
            if log is None:
                log = self._logs[run_id] = []
            log.append(event)
            del log[: -self.keep_events]
            self._logs.move_to_end(run_id)
            while len(self._logs) > self.keep_runs:
                gone, _ = self._logs.popitem(last=False)
                if gone not in self._subs:
                    self._seqs.pop(gone, None)
            subs = list(self._subs.get(run_id, ()))
        for sub in subs:
            sub.push(event)
        return event

    def subscribe(self, run_id: str) -> tuple[Subscription, int]:
        """From a running event loop: a subscription, and the number of the run's last event
        so far (0: none yet); every event after that one reaches the subscription."""
        sub = Subscription(self, run_id, asyncio.get_running_loop())
        with self._lock:
            self._subs.setdefault(run_id, set()).add(sub)
            return sub, self._seqs.get(run_id, 0)

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            subs = self._subs.get(sub.run_id)
            if subs is None:
                return
            subs.discard(sub)
            if not subs:
                del self._subs[sub.run_id]
                if sub.run_id not in self._logs:
                    self._seqs.pop(sub.run_id, None)

    def since(self, run_id: str, seq: int) -> list[LiveEvent] | None:
        """The run's events after number `seq`, in order; None when some of them are no
        longer kept (the caller then starts from the database's state)."""
        with self._lock:
            log = list(self._logs.get(run_id, ()))
            last = self._seqs.get(run_id, 0)
        missed = [e for e in log if e.seq > seq]
        if seq > last or (seq < last and (not missed or missed[0].seq != seq + 1)):
            return None
        return missed

    def latest(self, run_id: str) -> LiveEvent | None:
        with self._lock:
            log = self._logs.get(run_id)
            return log[-1] if log else None

    def event_id(self, seq: int) -> str:
        return f"{self.epoch}-{seq}"

    def parse_id(self, value: str | None) -> int | None:
        """The number in an id this hub made; None for anything else."""
        if not value:
            return None
        epoch, _, number = value.strip().partition("-")
        if epoch != self.epoch or not number.isdigit():
            return None
        return int(number)

    def close(self) -> None:
        """Wake every stream so it ends (the server is stopping)."""
        self._closed.set()
        with self._lock:
            subs = [s for group in self._subs.values() for s in group]
        for sub in subs:
            sub.push(None)


class LiveSink:
    """The executor's sink: the database first (`inner`), then the hub."""

    def __init__(self, inner: ResultSink, hub: ProgressHub) -> None:
        self.inner = inner
        self.hub = hub

    def on_event(self, event: ProgressEvent) -> None:
        at = time.time()
        self.inner.on_event(event)
        if not event.state.is_final:
            self.hub.publish(event.job_id, event.state.value, event.detail, at)

    def on_result(self, result: RunResult) -> None:
        at = time.time()
        self.inner.on_result(result)
        self.hub.publish(result.job_id, result.state.value, result.message, at)
