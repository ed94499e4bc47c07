"""The fleet registry: each worker process announces itself; the web side reads the roll.

A worker process writes `<prefix>:worker:<id>` (JSON) every couple of seconds with a TTL
a few times longer, and lists its id in `<prefix>:workers`. A worker that stops beating
drops out by itself when its key expires; readers prune the index as they go.
"""

from __future__ import annotations

import logging
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterable

import pydantic
import redis

from kplay.kernels.models import RunJob
from kplay.workers.fleet_models import (
    FleetSnapshot,
    LiveFacts,
    LiveWorker,
    QueueState,
    WorkerBeat,
    WorkerInfo,
)
from kplay.workers.jobstore import JobStore

log = logging.getLogger(__name__)

Extra = Callable[[], LiveFacts]


class Heartbeat:
    """A daemon thread that keeps this worker process's registry entry fresh.

    `begin()`/`end()` bracket a job. They take the same lock as a beat, so once `end()`
    returns no beat can still carry the finished job (a beat rebuilds the ticket of the
    current job after a Redis restart, and must never resurrect a finished one).
    """

    def __init__(
        self,
        store: JobStore,
        info: WorkerInfo,
        interval_s: float = 2.0,
        ttl_s: float = 10.0,
        extra: Extra | None = None,
    ) -> None:
        self.store = store
        self.info = info
        self.worker_id = info.id
        self.interval_s = interval_s
        self.ttl_s = ttl_s
        self.extra = extra
        self.started_at = time.time()
        self.jobs_done = 0
        self._job: tuple[RunJob, str] | None = None
        self._job_since: float | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="kplay-heartbeat", daemon=True)
        self._thread.start()

    def begin(self, job: RunJob, queue: str) -> None:
        with self._lock:
            self._job = (job, queue)
            self._job_since = time.time()
        self._beat_quietly()

    def end(self) -> None:
        with self._lock:
            self._job = None
            self._job_since = None
            self.jobs_done += 1
        self._beat_quietly()

    def stop(self) -> None:
        """Stop beating and leave the roll at once (a clean exit is not a lost worker)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval_s + 1.0)
        try:
            self.store.r.delete(self.store.keys.worker(self.worker_id))
            self.store.r.srem(self.store.keys.workers, self.worker_id)
        except redis.RedisError:
            pass

    def payload(self) -> WorkerBeat:
        job = self._job
        facts = LiveFacts()
        if self.extra is not None:
            try:
                facts = self.extra()
            except Exception:  # noqa: BLE001 - optional facts must not stop the heartbeat
                log.debug("heartbeat extra failed", exc_info=True)
        return WorkerBeat(
            **self.info.model_dump(),
            ceilings=facts.ceilings,
            clocks=facts.clocks,
            busy=job is not None,
            current_job=job[0].job_id if job else None,
            job_started_at=self._job_since,
            jobs_done=self.jobs_done,
            started_at=self.started_at,
            last_seen=time.time(),
            pid=os.getpid(),
        )

    def beat(self) -> None:
        with self._lock:
            keys = self.store.keys
            pipe = self.store.r.pipeline()
            pipe.set(
                keys.worker(self.worker_id),
                self.payload().model_dump_json(),
                px=int(self.ttl_s * 1000),
            )
            pipe.sadd(keys.workers, self.worker_id)
            pipe.execute()
            if self._job is not None:
                job, queue = self._job
                # After a Redis restart the ticket is gone while the job still runs here.
                if not self.store.r.exists(keys.ticket(job.job_id), keys.result(job.job_id)):
                    self.store.mark_running(job, queue, self.worker_id)

    def _beat_quietly(self) -> None:
        try:
            self.beat()
        except redis.RedisError as exc:
            log.warning("heartbeat failed (%s); retrying", exc)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._beat_quietly()
            self._stop.wait(self.interval_s)


# ---------------------------------------------------------------- reading the roll


def live_workers(store: JobStore) -> list[LiveWorker]:
    """Every worker whose heartbeat has not expired, oldest first, with `age_s`.

    An entry that does not read as a heartbeat is left out (and logged), not fatal to
    the roll: it expires by itself like any other.
    """
    keys = store.keys
    ids = sorted(store.r.smembers(keys.workers))
    if not ids:
        return []
    raws = store.r.mget([keys.worker(i) for i in ids])
    now = time.time()
    workers: list[LiveWorker] = []
    gone = []
    for worker_id, raw in zip(ids, raws, strict=True):
        if raw is None:
            gone.append(worker_id)
            continue
        try:
            worker = LiveWorker.model_validate_json(raw)
        except pydantic.ValidationError as exc:
            log.warning("unreadable registry entry of worker %s: %s", worker_id, exc)
            continue
        seen = worker.last_seen if worker.last_seen is not None else now
        worker.age_s = round(max(0.0, now - seen), 1)
        workers.append(worker)
    if gone:
        store.r.srem(keys.workers, *gone)
    return sorted(workers, key=lambda w: (w.started_at or 0.0, w.id))


def workers_for(queue: str, workers: Iterable[LiveWorker]) -> list[LiveWorker]:
    return [w for w in workers if queue in w.queues]


def queue_depth(store: JobStore, celery_prefix: str, queue: str) -> int:
    """Messages waiting in Celery's list for `queue` (not counting those being run)."""
    return int(store.r.llen(celery_prefix + queue))


def mean_job_s(store: JobStore, queue: str) -> float | None:
    durations = store.recent_durations(queue)
    return statistics.fmean(durations) if durations else None


def wait_estimate_s(ahead: int, mean_s: float | None, n_workers: int) -> float | None:
    """Jobs ahead x recent mean job time / workers that can take them; None if unknown."""
    if mean_s is None or n_workers <= 0:
        return None
    return round(ahead * mean_s / n_workers, 1)


def queue_state(
    store: JobStore, celery_prefix: str, name: str, workers: list[LiveWorker]
) -> QueueState:
    serving = workers_for(name, workers)
    depth = queue_depth(store, celery_prefix, name)
    mean_s = mean_job_s(store, name)
    return QueueState(
        name=name,
        depth=depth,
        workers=len(serving),
        busy=sum(1 for w in serving if w.busy),
        mean_job_s=None if mean_s is None else round(mean_s, 2),
        wait_estimate_s=wait_estimate_s(depth, mean_s, len(serving)),
    )


def snapshot(store: JobStore, celery_prefix: str, queues: Iterable[str] = ()) -> FleetSnapshot:
    """The whole fleet for the page and the API: workers and each queue's state."""
    workers = live_workers(store)
    names = set(queues)
    for w in workers:
        names.update(w.queues)
    return FleetSnapshot(
        mode="distributed",
        workers=workers,
        queues=[queue_state(store, celery_prefix, name, workers) for name in sorted(names)],
        generated_at=time.time(),
    )
