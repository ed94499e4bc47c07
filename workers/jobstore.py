"""What the distributed mode keeps in Redis besides Celery's own queues.

Both ends share this layout. Per job: a ticket (hash: user, queue, state, worker) that
exists while the job is queued or running, a start counter, and the final result (with
a TTL, so a consumer that was away loses nothing). Per deployment: one stream of
progress events and results that the web side reads with a consumer group, a sorted
set per queue (arrival order, for queue positions), a set of active jobs per user (the
cap) and the recent job durations per queue (wait estimates).

The final result is written at most once: the first verdict wins, so a job that was
delivered twice, or ended by the janitor while a late worker finished it, reports one.

Every verdict and event is signed (workers.signing) and read back only when its
signature holds: a record that someone with access to Redis wrote without the result key
is logged and ignored, and a forged verdict stored first does not keep the real one out.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import redis

from kplay.kernels.models import ProgressEvent, RunJob, RunResult, RunState
from kplay.workers.signing import Signer

STREAM_MAXLEN = 100_000
# Recent job durations kept per queue, each as "<seconds> <problem> <backend>" (an older
# worker's entry is the seconds alone): the wait estimates read them (workers.waits).
DURATIONS_KEPT = 200
ANONYMOUS = "anonymous"

_ADMIT = """
local cap = tonumber(ARGV[1])
if cap > 0 then
  local n = 0
  for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
    if redis.call('EXISTS', ARGV[2] .. id) == 1 then n = n + 1
    else redis.call('SREM', KEYS[1], id) end
  end
  if n >= cap then return n end
end
local ttl = tonumber(ARGV[5])
redis.call('SADD', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('HSET', KEYS[2], 'state', 'queued', 'queue', ARGV[4], 'user', ARGV[6],
           'problem', ARGV[7], 'backend', ARGV[8], 'submitted_at', ARGV[9])
redis.call('EXPIRE', KEYS[2], ttl)
redis.call('ZADD', KEYS[3], redis.call('INCR', KEYS[4]), ARGV[3])
return -1
"""

_FINISH = """
if not redis.call('SET', KEYS[1], ARGV[2], 'NX', 'EX', ARGV[3]) then return 0 end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*', 'kind', 'result',
           'job_id', ARGV[1], 'worker', ARGV[5], 'data', ARGV[8], 'sig', ARGV[9])
redis.call('DEL', KEYS[3])
redis.call('SREM', KEYS[4], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('SREM', KEYS[6], ARGV[1])
if ARGV[6] ~= '' then
  redis.call('LPUSH', KEYS[7], ARGV[6])
  redis.call('LTRIM', KEYS[7], 0, tonumber(ARGV[7]) - 1)
end
return 1
"""

_DELETE_IF_SAME = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class Keys:
    """Every key name, in one place."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.stream = f"{prefix}:results"
        self.seq = f"{prefix}:seq"
        self.running = f"{prefix}:running"
        self.workers = f"{prefix}:workers"
        self.janitor = f"{prefix}:janitor"
        self.ticket_prefix = f"{prefix}:job:"

    def ticket(self, job_id: str) -> str:
        return self.ticket_prefix + job_id

    def result(self, job_id: str) -> str:
        return f"{self.prefix}:result:{job_id}"

    def starts(self, job_id: str) -> str:
        return f"{self.prefix}:starts:{job_id}"

    def active(self, user: str) -> str:
        return f"{self.prefix}:active:{user}"

    def queued(self, queue: str) -> str:
        return f"{self.prefix}:queued:{queue}"

    def durations(self, queue: str) -> str:
        return f"{self.prefix}:durations:{queue}"

    def worker(self, worker_id: str) -> str:
        return f"{self.prefix}:worker:{worker_id}"


@dataclass(frozen=True)
class Finished:
    result: RunResult
    worker: str | None
    finished_at: float | None


def connect(url: str) -> redis.Redis:
    """A client whose calls fail within seconds when Redis is away, instead of hanging."""
    return redis.Redis.from_url(
        url,
        decode_responses=True,
        socket_timeout=5.0,
        socket_connect_timeout=3.0,
        health_check_interval=10,
    )


def user_key(job: RunJob) -> str:
    return job.user or ANONYMOUS


class JobStore:
    """`signer` is needed by whatever writes or reads verdicts and events; the fleet
    registry and the queues work without it."""

    def __init__(
        self,
        client: redis.Redis,
        prefix: str,
        ticket_ttl_s: int = 86400,
        result_ttl_s: int = 7 * 86400,
        signer: Signer | None = None,
    ) -> None:
        # Any: redis-py's annotations ignore decode_responses (every reply here is str).
        self.r: Any = client
        self.keys = Keys(prefix)
        self.ticket_ttl_s = ticket_ttl_s
        self.result_ttl_s = result_ttl_s
        self._signer = signer
        self._admit = client.register_script(_ADMIT)
        self._finish = client.register_script(_FINISH)
        self._delete_if_same = client.register_script(_DELETE_IF_SAME)

    # ------------------------------------------------------------ web side

    def admit(self, job: RunJob, queue: str, cap: int) -> int | None:
        """Ticket the job and count it against its user; the user's active count if refused."""
        k = self.keys
        outcome = self._admit(
            keys=[k.active(user_key(job)), k.ticket(job.job_id), k.queued(queue), k.seq],
            args=[
                cap,
                k.ticket_prefix,
                job.job_id,
                queue,
                self.ticket_ttl_s,
                user_key(job),
                job.problem,
                job.backend,
                time.time(),
            ],
        )
        return None if int(outcome) < 0 else int(outcome)

    def forget(self, job: RunJob, queue: str) -> None:
        """Undo admit() for a job that could not be sent."""
        k = self.keys
        pipe = self.r.pipeline()
        pipe.delete(k.ticket(job.job_id))
        pipe.srem(k.active(user_key(job)), job.job_id)
        pipe.zrem(k.queued(queue), job.job_id)
        pipe.execute()

    def ticket(self, job_id: str) -> dict[str, str] | None:
        data = self.r.hgetall(self.keys.ticket(job_id))
        return data or None

    def position(self, job_id: str) -> int | None:
        ticket = self.ticket(job_id)
        if ticket is None:
            return None
        if ticket.get("state") == "running":
            return 0
        rank = self.r.zrank(self.keys.queued(ticket.get("queue", "")), job_id)
        return None if rank is None else int(rank) + 1

    def requeue(self, job_id: str, queue: str) -> None:
        """A job whose worker vanished goes back to the front of its queue."""
        k = self.keys
        pipe = self.r.pipeline()
        pipe.hset(k.ticket(job_id), mapping={"state": "queued", "worker": ""})
        pipe.srem(k.running, job_id)
        pipe.zadd(k.queued(queue), {job_id: 0})
        pipe.execute()

    def running_jobs(self) -> dict[str, dict[str, str]]:
        ids = list(self.r.smembers(self.keys.running))
        pipe = self.r.pipeline()
        for job_id in ids:
            pipe.hgetall(self.keys.ticket(job_id))
        out = {}
        for job_id, ticket in zip(ids, pipe.execute(), strict=True):
            if ticket:
                out[job_id] = ticket
            else:
                self.r.srem(self.keys.running, job_id)
        return out

    def queued_ids(self, queue: str) -> list[str]:
        return list(self.r.zrange(self.keys.queued(queue), 0, -1))

    def prune_queued(self, queue: str) -> int:
        """Drop queue-order entries whose ticket is gone; returns how many."""
        gone = [i for i in self.queued_ids(queue) if not self.r.exists(self.keys.ticket(i))]
        if gone:
            self.r.zrem(self.keys.queued(queue), *gone)
        return len(gone)

    def finished(self, job_id: str) -> Finished | None:
        """The job's stored verdict; None when there is none, or none signed with our key."""
        raw = self.r.get(self.keys.result(job_id))
        return None if raw is None else self._stored(job_id, raw)

    def _stored(self, job_id: str, raw: str) -> Finished | None:
        try:
            record = json.loads(raw)
            data, sig = record["data"], record["sig"]
        except (ValueError, TypeError, KeyError):
            data, sig = None, None
        return self._open_result(job_id, data, sig)

    def decode_entry(self, fields: dict[str, Any]) -> ProgressEvent | Finished | None:
        """One stream entry as the event or verdict it carries; None when there is none or
        it is not signed with our key. Raises ValueError for a signed entry it cannot read."""
        if not fields.get("data"):
            return None
        job_id, data, sig = fields.get("job_id"), fields["data"], fields.get("sig")
        if fields.get("kind") != "event":
            return self._open_result(job_id, data, sig)
        if not self.signer.check("event", job_id, data, sig):
            return None
        event = ProgressEvent.model_validate_json(data)
        # Signed under its job id, so a mismatch is a bug, never an attack: still dropped.
        return event if event.job_id == job_id else None

    def _open_result(self, job_id: object, data: object, sig: object) -> Finished | None:
        if not self.signer.check("result", job_id, data, sig):
            return None
        envelope = json.loads(str(data))
        result = RunResult.model_validate(envelope["result"])
        if result.job_id != job_id:
            return None
        return Finished(result, envelope.get("worker"), envelope.get("finished_at"))

    @property
    def signer(self) -> Signer:
        if self._signer is None:
            raise RuntimeError("this job store has no result key: it cannot sign or check")
        return self._signer

    def recent_durations(self, queue: str) -> list[float]:
        return [seconds for seconds, _kind in self.recent_jobs(queue)]

    def recent_jobs(self, queue: str) -> list[tuple[float, tuple[str, str] | None]]:
        """(seconds, (problem, backend)) of the queue's recent jobs, newest first; the kind
        is None for an entry that does not name it."""
        out: list[tuple[float, tuple[str, str] | None]] = []
        for raw in self.r.lrange(self.keys.durations(queue), 0, -1):
            parts = str(raw).split()
            try:
                seconds = float(parts[0])
            except (IndexError, ValueError):
                continue
            out.append((seconds, (parts[1], parts[2]) if len(parts) == 3 else None))
        return out

    def queued_tickets(self, queue: str) -> list[tuple[str, dict[str, str]]]:
        """The queue's waiting jobs in order, each with its ticket (empty when gone)."""
        ids = self.queued_ids(queue)
        pipe = self.r.pipeline()
        for job_id in ids:
            pipe.hgetall(self.keys.ticket(job_id))
        return list(zip(ids, pipe.execute(), strict=True))

    # ------------------------------------------------------------ worker side

    def count_start(self, job_id: str) -> int:
        pipe = self.r.pipeline()
        pipe.incr(self.keys.starts(job_id))
        pipe.expire(self.keys.starts(job_id), self.ticket_ttl_s)
        return int(pipe.execute()[0])

    def mark_running(self, job: RunJob, queue: str, worker: str) -> None:
        """Idempotent: also rebuilds the ticket of a running job after a Redis restart."""
        k = self.keys
        pipe = self.r.pipeline()
        pipe.hset(
            k.ticket(job.job_id),
            mapping={
                "state": "running",
                "queue": queue,
                "user": user_key(job),
                "worker": worker,
                "problem": job.problem,
                "backend": job.backend,
                "running_since": time.time(),
            },
        )
        pipe.hsetnx(k.ticket(job.job_id), "started_at", time.time())
        pipe.expire(k.ticket(job.job_id), self.ticket_ttl_s)
        pipe.zrem(k.queued(queue), job.job_id)
        pipe.sadd(k.running, job.job_id)
        pipe.sadd(k.active(user_key(job)), job.job_id)
        pipe.execute()

    def publish_event(self, event: ProgressEvent, worker: str) -> None:
        data = event.model_dump_json()
        self.r.xadd(
            self.keys.stream,
            {
                "kind": "event",
                "job_id": event.job_id,
                "worker": worker,
                "data": data,
                "sig": self.signer.sign("event", event.job_id, data),
            },
            maxlen=STREAM_MAXLEN,
            approximate=True,
        )

    def finish(
        self,
        result: RunResult,
        *,
        user: str,
        queue: str,
        worker: str,
        duration_s: float | None = None,
    ) -> bool:
        """Store and announce the verdict; False when the job already had one."""
        k = self.keys
        envelope = {
            "worker": worker,
            "finished_at": time.time(),
            "result": result.model_dump(mode="json"),
        }
        job_id = result.job_id
        data = json.dumps(envelope)
        sig = self.signer.sign("result", job_id, data)
        record = json.dumps({"data": data, "sig": sig})
        keys = [
            k.result(job_id),
            k.stream,
            k.ticket(job_id),
            k.active(user),
            k.queued(queue),
            k.running,
            k.durations(queue),
        ]
        duration = (
            "" if duration_s is None else f"{duration_s:.3f} {result.problem} {result.backend}"
        )
        args = [job_id, record, self.result_ttl_s, STREAM_MAXLEN, worker, duration]
        args += [DURATIONS_KEPT, data, sig]
        outcome = self._finish(keys=keys, args=args)
        if not outcome and self._drop_forged(job_id):
            outcome = self._finish(keys=keys, args=args)  # once: the forged one is gone
        return bool(outcome)

    def _drop_forged(self, job_id: str) -> bool:
        """Remove a stored verdict that is not signed with our key; True if one was."""
        key = self.keys.result(job_id)
        raw = self.r.get(key)
        if raw is None or self._stored(job_id, raw) is not None:
            return False
        return bool(self._delete_if_same(keys=[key], args=[raw]))

    def finish_lost(self, job_id: str, ticket: dict[str, str], message: str, worker: str) -> bool:
        """End a job nobody will finish, from what its ticket remembers."""
        result = RunResult(
            job_id=job_id,
            problem=ticket.get("problem", "?"),
            backend=ticket.get("backend", "?"),
            state=RunState.runtime_error,
            message=message,
        )
        return self.finish(
            result, user=ticket.get("user", ANONYMOUS), queue=ticket.get("queue", ""), worker=worker
        )
