"""The janitor: jobs whose worker vanished mid-run are given back, or ended.

A worker that dies outright (SIGKILL, lost host) leaves its job's message in Celery's
"unacked" hash; Redis's visibility timeout would hand it out again, but only after a
time longer than the hard limit. The fleet registry knows much sooner: a running
ticket that no live worker announces as its current job. The janitor then puts the
message back at the front of its queue, or, when the job has already been started
`max_deliveries` times, ends it with a clear verdict and drops the message, so that a
kernel that kills its worker cannot loop through the fleet.

Several web processes may run a janitor; a short Redis lock lets one act per round.
"""

from __future__ import annotations

import json
import logging
import time

from celery import Celery

from kplay.workers.celery_app import WorkerConfig
from kplay.workers.fleet import live_workers
from kplay.workers.jobstore import JobStore

log = logging.getLogger(__name__)

LOST_TWICE = "the worker was lost twice while running this job"
LOST_NO_MESSAGE = "the worker running this job was lost, and the job cannot be sent again"
_PRUNE_EVERY_S = 30.0


class Janitor:
    def __init__(
        self, store: JobStore, celery: Celery, config: WorkerConfig, interval_s: float = 2.0
    ) -> None:
        self.store = store
        self.celery = celery
        self.config = config
        self.interval_s = interval_s
        self._next = 0.0
        self._next_prune = 0.0

    def tick(self) -> None:
        """Run one round if it is time and no other process holds the round."""
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self.interval_s
        lock = self.store.r.set(
            self.store.keys.janitor, "1", nx=True, px=max(1, int(self.interval_s * 1000))
        )
        if not lock:
            return
        self.recover_lost()
        if now >= self._next_prune:
            self._next_prune = now + _PRUNE_EVERY_S
            self.prune()

    def recover_lost(self) -> list[str]:
        """Requeue or end every running job no live worker announces; returns their ids.

        A worker announces its current job from before it starts until its verdict is
        out, so a running ticket nobody announces for longer than a heartbeat's TTL
        belongs to a worker that is gone (or whose pool child died: its verdict comes
        from Celery's main process, usually long before this).
        """
        announced = {w.current_job for w in live_workers(self.store)}
        grace_s = self.config.heartbeat_ttl_s
        handled = []
        for job_id, ticket in self.store.running_jobs().items():
            since = float(ticket.get("running_since") or 0.0)
            if job_id in announced or time.time() - since < grace_s:
                continue
            handled.append(job_id)
            self._recover(job_id, ticket)
        return handled

    def _recover(self, job_id: str, ticket: dict[str, str]) -> None:
        queue = ticket.get("queue", "")
        starts = int(self.store.r.get(self.store.keys.starts(job_id)) or 0)
        tag = self._unacked_tag(job_id)
        if tag is None:
            if self._waiting_in(queue, job_id):  # Redis already handed it back
                self.store.requeue(job_id, queue)
            else:
                self.store.finish_lost(job_id, ticket, LOST_NO_MESSAGE, worker="janitor")
                log.warning("job %s ended: %s", job_id, LOST_NO_MESSAGE)
        elif starts >= self.config.max_deliveries:
            self._drop(tag)
            self.store.finish_lost(job_id, ticket, LOST_TWICE, worker="janitor")
            log.warning("job %s ended: %s", job_id, LOST_TWICE)
        else:
            # The ticket first: once the message is back, a worker may take it and mark the job
            # running at once, and a requeue after that would hide the running job from the
            # next rounds (until Redis's visibility timeout, if its worker is lost too).
            self.store.requeue(job_id, queue)
            self._restore(tag)
            log.warning(
                "job %s: its worker %s vanished; queued again", job_id, ticket.get("worker")
            )

    def prune(self) -> None:
        """Forget queue-order entries of jobs that no longer exist."""
        for queue in {q for w in live_workers(self.store) for q in w.queues}:
            self.store.prune_queued(queue)

    # ------------------------------------------------------------ Celery's unacked hash

    @property
    def _unacked(self) -> str:
        return self.config.celery_key_prefix + "unacked"

    @property
    def _unacked_index(self) -> str:
        return self.config.celery_key_prefix + "unacked_index"

    def _unacked_tag(self, job_id: str) -> str | None:
        """The delivery tag under which the job's message waits for an ack, if it does."""
        for tag, raw in self.store.r.hgetall(self._unacked).items():
            try:
                message = json.loads(raw)[0]
            except (ValueError, IndexError, TypeError):
                continue
            if message.get("headers", {}).get("id") == job_id:
                return str(tag)
        return None

    def _waiting_in(self, queue: str, job_id: str) -> bool:
        for raw in self.store.r.lrange(self.config.celery_key_prefix + queue, 0, -1):
            try:
                if json.loads(raw).get("headers", {}).get("id") == job_id:
                    return True
            except (ValueError, AttributeError):
                continue
        return False

    def _restore(self, tag: str) -> None:
        # kombu's own restore (under its mutex): the message goes back to the end of the
        # list that consumers pop from, i.e. it is the next one taken.
        from kombu.transport.redis import Mutex, MutexHeld

        with self.celery.connection_for_write() as conn:
            channel = conn.default_channel
            try:
                with Mutex(channel.client, channel.unacked_mutex_key, channel.unacked_mutex_expire):
                    channel.qos.restore_by_tag(tag, leftmost=False)
            except MutexHeld:
                log.info("unacked messages are being restored by a worker right now")

    def _drop(self, tag: str) -> None:
        pipe = self.store.r.pipeline()
        pipe.hdel(self._unacked, tag)
        pipe.zrem(self._unacked_index, tag)
        pipe.execute()
