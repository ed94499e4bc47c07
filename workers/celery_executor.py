"""The executor of the distributed mode: jobs go out on Celery, verdicts come back on Redis.

`submit()` picks a capability queue, refuses at once what no live worker can take or
what would put a user over their cap, and sends the job. A consumer thread reads the
deployment's result stream through a consumer group and hands events and verdicts to
the sink; an entry is acknowledged only after the sink took it, so a web process that
restarts (or dies) loses nothing: its pending entries are claimed again. An entry not
signed with the deployment's result key (workers.signing) is logged and dropped: it
never updates a run. The same thread runs the janitor (workers.recovery) and survives
Redis restarts with backoff.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from collections import Counter
from typing import Any

import redis
from pydantic import SecretStr

from kplay.kernels.models import RunJob
from kplay.workers.celery_app import DEFAULT_QUEUES, TASK_NAME, WorkerConfig, make_celery
from kplay.workers.executor import Executor, ResultSink, SubmitRefused
from kplay.workers.fleet import live_workers, snapshot, workers_for
from kplay.workers.fleet_models import FleetSnapshot
from kplay.workers.jobstore import Finished, JobStore, connect
from kplay.workers.plan import PROFILE_QUEUE, device_kind
from kplay.workers.recovery import Janitor
from kplay.workers.signing import Signer
from kplay.workers.waits import Durations, start_in_s

log = logging.getLogger(__name__)

CPU_BACKENDS = frozenset({"numba-cpu"})
GROUP = "web"
_SINK_ATTEMPTS = 3
_REQUIRES = re.compile(r"^sm\d{2,3}[a-z]?$")


def route(job: RunJob) -> str:
    """The capability queue a job needs: `cpu`, `gpu.any`, `gpu.sm90`, `gpu.<device>`."""
    if job.backend in CPU_BACKENDS:
        return "cpu"
    if job.mode == "profile":  # an arch-specific cell's profile needs its own capability
        return f"{PROFILE_QUEUE}.{job.requires}" if job.requires else PROFILE_QUEUE
    if job.device:
        return f"gpu.{device_kind(job.device)}"
    if job.requires:
        if not _REQUIRES.match(job.requires):
            raise SubmitRefused(
                f"cannot understand requires={job.requires!r}; use a compute capability "
                "such as 'sm90'"
            )
        return f"gpu.{job.requires}"
    return "gpu.any"


PICTURE_TTL_S = 1.0


class QueuePicture:
    """One queue at one moment: its running jobs (kind, seconds so far), its waiting jobs'
    kinds in order, the workers serving it and its recent job durations by kind."""

    def __init__(self, taken: float) -> None:
        self.taken = taken
        self.running: list[tuple[tuple[str, str], float]] = []
        self.queued: list[tuple[str, str]] = []
        self.order: dict[str, int] = {}
        self.workers = 0
        self.durations = Durations()

    @classmethod
    def read(cls, store: JobStore, queue: str, taken: float) -> QueuePicture:
        picture = cls(taken)
        wall = time.time()
        for ticket in store.running_jobs().values():
            if ticket.get("queue") == queue:
                since = float(ticket.get("running_since") or wall)
                picture.running.append((_kind(ticket), max(0.0, wall - since)))
        for job_id, ticket in store.queued_tickets(queue):
            if ticket:
                picture.order[job_id] = len(picture.queued)
                picture.queued.append(_kind(ticket))
        picture.workers = len(workers_for(queue, live_workers(store)))
        for seconds, kind in reversed(store.recent_jobs(queue)):  # oldest first
            picture.durations.add(kind or ("?", "?"), seconds)
        return picture


def _kind(ticket: dict[str, str]) -> tuple[str, str]:
    return (ticket.get("problem", "?"), ticket.get("backend", "?"))


class CeleryExecutor(Executor):
    def __init__(
        self,
        broker_url: str,
        job_timeout_s: float | None = None,
        *,
        key_prefix: str | None = None,
        user_run_cap: int | None = None,
        result_key: SecretStr | str | None = None,
        consumer_name: str | None = None,
        claim_idle_s: float = 30.0,
        janitor_interval_s: float = 2.0,
        config: WorkerConfig | None = None,
    ) -> None:
        given = {
            "broker_url": broker_url,
            "job_timeout_s": job_timeout_s,
            "key_prefix": key_prefix,
            "user_run_cap": user_run_cap,
            "result_key": SecretStr(result_key) if isinstance(result_key, str) else result_key,
        }
        base = config or WorkerConfig()
        self.config = base.model_copy(update={k: v for k, v in given.items() if v is not None})
        # Raises MissingResultKey: without the key no verdict could be trusted.
        self.signer = Signer.for_settings(self.config)
        self.celery = make_celery(self.config)
        self.store = self._new_store()
        self.consumer = consumer_name or f"{socket.gethostname()}-{os.getpid()}"
        self.claim_idle_s = claim_idle_s
        self.janitor = Janitor(self.store, self.celery, self.config, janitor_interval_s)
        self._sink: ResultSink | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failures: Counter[str] = Counter()
        self._pictures: dict[str, QueuePicture] = {}
        self._pictures_lock = threading.Lock()

    def _new_store(self) -> JobStore:
        assert self.config.broker_url
        return JobStore(
            connect(self.config.broker_url),
            self.config.key_prefix,
            self.config.ticket_ttl_s,
            self.config.result_ttl_s,
            signer=self.signer,
        )

    # ------------------------------------------------------------ Executor

    def start(self, sink: ResultSink) -> None:
        self._sink = sink
        if self._thread is not None and self._thread.is_alive():
            return  # already consuming: only the sink changes
        self._stop.clear()
        self._thread = threading.Thread(target=self._consume, name="kplay-results", daemon=True)
        self._thread.start()

    def submit(self, job: RunJob) -> None:
        queue = route(job)
        try:
            self._check_served(job, queue)
            active = self.store.admit(job, queue, self.config.user_run_cap)
        except redis.RedisError as exc:
            raise SubmitRefused(
                f"the job queue is not reachable right now ({type(exc).__name__}); "
                "try again in a moment"
            ) from None
        if active is not None:
            raise SubmitRefused(
                f"you already have {active} runs queued or running (the limit is "
                f"{self.config.user_run_cap}); wait for one of them to finish"
            )
        try:
            self.celery.send_task(
                TASK_NAME,
                args=[job.model_dump_json()],
                task_id=job.job_id,
                queue=queue,
                exchange="",
                routing_key=queue,
            )
        except Exception:
            self.store.forget(job, queue)
            raise

    def _check_served(self, job: RunJob, queue: str) -> None:
        workers = live_workers(self.store)
        if workers_for(queue, workers):
            return
        offered = sorted({q for w in workers for q in w.queues})
        why = (
            f"no live worker takes jobs from queue {queue!r}; queues served now: "
            f"{', '.join(offered)}"
            if offered
            else "no worker is connected"
        )
        if queue.startswith(PROFILE_QUEUE):
            raise SubmitRefused(
                "no worker can take profiles right now: a profile needs a GPU worker on a host "
                f"with Nsight Compute (ncu); {why}"
            )
        raise SubmitRefused(f"no worker can run {job.backend} kernels right now: {why}")

    def queue_position(self, job_id: str) -> int | None:
        try:
            return self.store.position(job_id)
        except redis.RedisError:
            return None

    def wait_estimate_s(self, job_id: str) -> float | None:
        """Seconds until the job should start (workers.waits): the queue's running jobs and
        those ahead of this one, each by the recent durations of jobs of its kind."""
        try:
            ticket = self.store.ticket(job_id)
            if ticket is None:
                return None
            if ticket.get("state") == "running":
                return 0.0
            picture = self._queue_picture(ticket.get("queue", ""), job_id)
        except redis.RedisError:
            return None
        if job_id not in picture.order:
            return None
        ahead = picture.queued[: picture.order[job_id]]
        estimate = start_in_s(
            picture.running,
            ahead,
            picture.workers,
            picture.durations.samples,
            self.config.job_timeout_s,
        )
        return None if estimate is None else round(estimate, 1)

    def _queue_picture(self, queue: str, job_id: str) -> QueuePicture:
        """What runs and waits on `queue`, read from Redis at most once a second (every
        queued card asks, twice a second) unless `job_id` came after the last reading."""
        now = time.monotonic()
        with self._pictures_lock:
            cached = self._pictures.get(queue)
            if cached is not None and now - cached.taken < PICTURE_TTL_S and job_id in cached.order:
                return cached
        picture = QueuePicture.read(self.store, queue, now)
        with self._pictures_lock:
            self._pictures[queue] = picture
        return picture

    def devices(self) -> list[dict[str, Any]]:
        try:
            return [w.model_dump(mode="json") for w in live_workers(self.store)]
        except redis.RedisError:
            return []

    def fleet_snapshot(self) -> FleetSnapshot:
        """Workers and every queue's depth and wait estimate, for the fleet page."""
        return snapshot(self.store, self.config.celery_key_prefix, DEFAULT_QUEUES)

    def reconcile(self, known_unfinished_job_ids: list[str]) -> list[str]:
        """The ids of jobs that no longer exist anywhere; verdicts found are delivered.

        For each id: a stored verdict goes to the sink (it may have been missed while the
        web side was away); a ticket or a worker running it means it is alive; otherwise
        it vanished (typically: Redis restarted and kept nothing), and the caller should
        end it. Right after a Redis restart the answer is [] until workers had time to
        announce what they are running. Raises redis.RedisError when Redis is away.
        """
        ids = list(dict.fromkeys(known_unfinished_job_ids))
        if not ids:
            return []
        uptime = int(self.store.r.info("server").get("uptime_in_seconds", 0))
        if uptime < self.config.heartbeat_ttl_s:
            return []
        running = {w.current_job for w in live_workers(self.store)}
        vanished = []
        for job_id in ids:
            done = self.store.finished(job_id)
            if done is not None:
                self._deliver(done)
            elif self.store.ticket(job_id) is None and job_id not in running:
                vanished.append(job_id)
        return vanished

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)
            self._thread = None
        self.celery.close()

    # ------------------------------------------------------------ the result stream

    def _consume(self) -> None:
        reader = self._new_store()  # its own connection: XREADGROUP blocks
        delay, fresh, last_claim = 0.5, True, 0.0
        while not self._stop.is_set():
            try:
                if fresh:
                    self._ensure_group(reader)
                    self._read_pending(reader)
                    fresh = False
                if time.monotonic() - last_claim >= min(self.claim_idle_s, 10.0):
                    self._claim_stale(reader)
                    last_claim = time.monotonic()
                self.janitor.tick()
                self._read_new(reader)
                delay = 0.5
            except redis.ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    log.exception("reading the result stream failed")
                    self._stop.wait(delay)
                fresh = True  # the group is gone: Redis restarted or was flushed
            except redis.RedisError as exc:
                log.warning("result stream unreachable (%s); retrying in %.1f s", exc, delay)
                self._stop.wait(delay)
                delay, fresh = min(delay * 2, 5.0), True
            except Exception:  # noqa: BLE001 - this thread must outlive any single bug
                log.exception("result consumer failed; continuing")
                self._stop.wait(delay)
        reader.r.close()

    def _ensure_group(self, reader: JobStore) -> None:
        try:
            # From the start of the stream: verdicts written before any web process
            # existed (or while the group was gone) are read too.
            reader.r.xgroup_create(reader.keys.stream, GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def _read_pending(self, reader: JobStore) -> None:
        """Entries this consumer name took but never acknowledged (a stable name restarted)."""
        start = "0"
        while not self._stop.is_set():
            reply = reader.r.xreadgroup(
                GROUP, self.consumer, {reader.keys.stream: start}, count=100
            )
            entries = reply[0][1] if reply else []
            if not entries:
                return
            self._handle(reader, entries)
            start = entries[-1][0]

    def _claim_stale(self, reader: JobStore) -> None:
        """Take over entries another consumer (a dead web process) left unacknowledged."""
        start = "0-0"
        while not self._stop.is_set():
            reply = reader.r.xautoclaim(
                reader.keys.stream,
                GROUP,
                self.consumer,
                min_idle_time=int(self.claim_idle_s * 1000),
                start_id=start,
                count=100,
            )
            start, entries = reply[0], reply[1]
            self._handle(reader, entries)
            if start in ("0-0", b"0-0"):
                return

    def _read_new(self, reader: JobStore) -> None:
        reply = reader.r.xreadgroup(
            GROUP, self.consumer, {reader.keys.stream: ">"}, count=100, block=1000
        )
        for _, entries in reply or []:
            self._handle(reader, entries)

    def _handle(self, reader: JobStore, entries: list[Any]) -> None:
        for entry_id, fields in entries:
            if self._deliver_entry(entry_id, fields):
                reader.r.xack(reader.keys.stream, GROUP, entry_id)
                self._failures.pop(entry_id, None)

    def _deliver_entry(self, entry_id: str, fields: dict[str, Any] | None) -> bool:
        """True when the entry is dealt with (delivered, unreadable, or given up on)."""
        try:
            item = self.store.decode_entry(fields or {})  # None for an unsigned or forged one
        except ValueError:
            log.error("dropped an unreadable result-stream entry %s", entry_id)
            return True
        if item is None:
            return True
        try:
            if isinstance(item, Finished):
                self._deliver(item)
            elif self._sink is not None:
                self._sink.on_event(item)
            return True
        except Exception:  # noqa: BLE001 - left pending and retried, a few times
            self._failures[entry_id] += 1
            log.exception("the sink refused stream entry %s", entry_id)
            return self._failures[entry_id] >= _SINK_ATTEMPTS

    def _deliver(self, finished: Finished) -> None:
        if self._sink is not None:
            self._sink.on_result(finished.result)
