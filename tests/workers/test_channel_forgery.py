"""Nothing learner code writes on its child's private channel passes for a verdict of a
later job: every message carries the running job's nonce, a child that breaks the protocol
is killed, and one that wrote anything while idle never runs the next job.

The attacks are tests/workers/forgers.py; the channel's framing is tested on a bare socket
pair first.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kplay.kernels.models import RunState
from kplay.workers.channel import BadMessage, Channel, ChannelClosed
from kplay.workers.childproc import UNEXPECTED_MESSAGE
from kplay.workers.runner import WorkerPool
from tests.workers.celery_support import wait_for
from tests.workers.runner_support import SMALL, job

FORGERS = "tests.workers.forgers:run"

# ---------------------------------------------------------------- the framing


@pytest.fixture
def pair() -> Iterator[tuple[Channel, socket.socket]]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    chan = Channel(ours, max_message_bytes=1024)
    yield chan, theirs
    chan.close()
    theirs.close()


def _frame(body: bytes) -> bytes:
    return struct.pack("!i", len(body)) + body


def test_a_message_split_across_writes_is_handed_out_whole(
    pair: tuple[Channel, socket.socket],
) -> None:
    chan, theirs = pair
    data = _frame(json.dumps({"type": "event", "n": 1}).encode())
    theirs.sendall(data[:3])
    assert not chan.poll(0.05) and chan.pending()
    theirs.sendall(data[3:10])
    assert not chan.poll(0.05)
    theirs.sendall(data[10:] + _frame(b'{"type": "result"}'))
    assert chan.poll(0.05) and chan.recv() == {"type": "event", "n": 1}
    assert chan.poll(0) and chan.recv() == {"type": "result"}
    assert not chan.pending()
    theirs.close()
    assert chan.poll(0.05)
    with pytest.raises(ChannelClosed):
        chan.recv()


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (struct.pack("!i", 4096), "bytes"),  # longer than allowed: refused before it arrives
        (struct.pack("!i", -1) + b"x" * 8, "bytes"),
        (_frame(b"[1, 2]"), "not an object"),
        (_frame(b"\xff\xfe"), "not JSON"),
    ],
)
def test_what_is_not_a_message_is_a_bad_message(
    pair: tuple[Channel, socket.socket], raw: bytes, why: str
) -> None:
    chan, theirs = pair
    theirs.sendall(raw)
    with pytest.raises(BadMessage, match=why):
        chan.poll(0.5) and chan.recv()


def test_sending_to_a_child_that_never_reads_gives_up(
    pair: tuple[Channel, socket.socket],
) -> None:
    chan, _ = pair
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        for _ in range(10_000):  # fills the socket's buffers, then waits for the reader
            chan.send({"pad": "x" * 60_000}, timeout_s=0.3)
    assert time.monotonic() - started < 5.0


# ---------------------------------------------------------------- attacks from the child


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    # One child at a time: the job after an attack would be the attacker's next victim.
    with WorkerPool(1, SMALL, target=FORGERS) as p:
        yield p


def _gone(pid: int) -> bool:
    """Whether the child with this (host) pid is dead and reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _only_child(pool: WorkerPool) -> int:
    """The host pid of the pool's one child (the parent's view: a sandbox may renumber)."""

    def one() -> int | None:
        pids = pool.pids()
        return pids[0] if len(pids) == 1 else None

    return int(wait_for(one, 30, "the pool's one child"))


def _honest(pool: WorkerPool) -> int:
    """Run an honest job; the pid of the child that ran it."""
    result = pool.run(job("honest"))
    assert result.state is RunState.done, result
    assert result.message is not None and result.message.endswith("honest")
    return _only_child(pool)


@pytest.mark.parametrize(
    "attack",
    [
        "forge-no-nonce",
        "forge-wrong-nonce",
        "forge-event-wrong-nonce",
        "unknown-type",
        "not-json",
        "huge-frame",
    ],
)
def test_a_message_outside_the_protocol_kills_the_child_and_is_not_reported(
    pool: WorkerPool, attack: str
) -> None:
    victim = _honest(pool)
    attacked = pool.run(job(attack))
    # Not the forged "done", nor the honest "wrong" the child would have sent after it.
    assert attacked.state is RunState.runtime_error, attacked
    assert attacked.message == UNEXPECTED_MESSAGE
    assert _gone(victim)
    # The next job gets its true verdict, from a fresh child.
    assert _honest(pool) != victim


@pytest.mark.parametrize("attack", ["queue-after-result", "queue-stolen-after-result"])
def test_a_message_queued_after_the_result_never_reaches_the_next_job(
    pool: WorkerPool, tmp_path: Path, attack: str
) -> None:
    mark = tmp_path / "written"
    first = pool.run(job(f"{attack}:{mark}"))
    assert first.state is RunState.wrong  # its own verdict, sent before the attack
    writer = _only_child(pool)
    wait_for(mark.exists, 10, "the queued message")
    # Even with the right nonce of the job before: the message waits while no job runs,
    # so the child is killed and a fresh one takes the next job.
    assert _honest(pool) != writer
    assert _gone(writer)


def test_a_second_result_for_the_same_job_retires_the_child(pool: WorkerPool) -> None:
    # Learner code that reads the nonce off the stack can still speak for its own job
    # while it shares the child's interpreter; the real result then follows as a second
    # one, and the child must not serve another job.
    victim = _honest(pool)
    pool.run(job("second-result"))
    time.sleep(0.5)  # the real result is on the wire by now
    assert _honest(pool) != victim
    assert _gone(victim)


def test_a_frame_that_never_ends_cannot_stall_the_parent(pool: WorkerPool) -> None:
    started = time.monotonic()
    attacked = pool.run(job("half-frame"))
    assert attacked.state is RunState.timeout, attacked  # the wall clock still ran
    assert time.monotonic() - started < SMALL.wall_timeout_s + 5.0
    _honest(pool)
