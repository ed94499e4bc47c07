"""The distributed mode when things break: lost workers, a Redis restart, a web restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from kplay.kernels.models import RunState
from kplay.workers.executor import SubmitRefused
from tests.workers.celery_support import (  # noqa: F401 - fixtures
    Deployment,
    RecordingSink,
    RedisServer,
    deployment_fixture,
    job,
    redis_base_fixture,
    wait_for,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def _running_on(ex, job_id: str) -> str | None:  # type: ignore[no-untyped-def]
    ticket = ex.store.ticket(job_id) or {}
    return ticket.get("worker") if ticket.get("state") == "running" else None


def test_a_job_whose_worker_is_killed_runs_again_elsewhere(deployment: Deployment) -> None:
    procs = {name: deployment.start_worker(name) for name in ("cpu@a", "cpu@b")}
    sink = RecordingSink()
    ex = deployment.executor(sink)
    victim = job("sleep:3")
    ex.submit(victim)
    first = wait_for(lambda: _running_on(ex, victim.job_id), 30, "the job to start")
    deployment.kill(procs[first])

    result = sink.wait(victim.job_id)
    assert result.state is RunState.done
    survivor = ({"cpu@a", "cpu@b"} - {first}).pop()
    assert ex.store.finished(victim.job_id).worker == survivor
    assert ex.store.r.get(ex.store.keys.starts(victim.job_id)) == "2"


# The next two stand-ins kill their Celery worker (or its pool child) from the job, as an
# out-of-memory kill or a lost machine would. A sandboxed job cannot reach its worker at all
# (tests/workers/test_sandbox.py shows that), so these workers run their children unboxed:
# what is tested here is the recovery, not the box.
UNBOXED = {"CUDA_VISIBLE_DEVICES": "", "KPLAY_SANDBOX": "off"}


def test_a_kernel_that_kills_its_worker_is_ended_after_one_retry(
    deployment: Deployment,
) -> None:
    for name in ("cpu@c", "cpu@d", "cpu@e"):
        deployment.start_worker(name, env=UNBOXED)
    sink = RecordingSink()
    ex = deployment.executor(sink)
    killer = job("kill-worker")
    ex.submit(killer)

    result = sink.wait(killer.job_id)
    assert result.state is RunState.runtime_error
    assert result.message == "the worker was lost twice while running this job"
    # Two workers were lost, the third is untouched, and nothing is left to redeliver.
    assert [w.id for w in deployment.live()] != []
    assert len(deployment.live()) == 1
    assert ex.store.r.hlen(deployment.config.celery_key_prefix + "unacked") == 0
    assert ex.store.r.llen(deployment.config.celery_key_prefix + "cpu") == 0
    follow_up = job("ok")
    ex.submit(follow_up)
    assert sink.wait(follow_up.job_id).state is RunState.done


def test_a_dead_pool_child_ends_its_job_and_the_worker_carries_on(
    deployment: Deployment,
) -> None:
    deployment.start_worker("cpu@f", env=UNBOXED)
    sink = RecordingSink()
    ex = deployment.executor(sink)
    crash = job("kill-pool-child")
    ex.submit(crash)
    result = sink.wait(crash.job_id)
    assert result.state is RunState.runtime_error
    assert "the worker process running this job died" in (result.message or "")
    # Celery replaces the pool child; the worker announces itself again and carries on.
    deployment.wait_worker("cpu@f")
    after = job("ok")
    ex.submit(after)
    assert sink.wait(after.job_id).state is RunState.done


def test_web_and_worker_survive_a_redis_restart(deployment: Deployment, tmp_path: Path) -> None:
    server = RedisServer(tmp_path)
    server.start()
    try:
        _restart_scenario(deployment, server)
    finally:
        server.stop()


def _restart_scenario(deployment: Deployment, server: RedisServer) -> None:
    from kplay.workers.celery_executor import CeleryExecutor

    env = {**deployment.env, "KPLAY_BROKER_URL": server.url}
    deployment.env = env
    deployment.url = server.url
    deployment.config = deployment.config.model_copy(update={"broker_url": server.url})
    deployment.start_worker("cpu@g")
    sink = RecordingSink()
    ex: CeleryExecutor = deployment.executor(sink)

    before = [job("sleep:0.2") for _ in range(3)] + [job("sleep:2")]
    for j in before:
        ex.submit(j)
    wait_for(lambda: _running_on(ex, before[0].job_id), 30, "the first job to start")
    server.stop()  # everything in Redis is gone: queues, tickets, the stream
    with pytest.raises(SubmitRefused, match="not reachable"):
        ex.submit(job("ok"))
    server.start()

    # Both sides reconnect: the worker announces itself again and takes new jobs.
    deployment.wait_worker("cpu@g")
    after = job("ok")
    wait_for(lambda: _submitted(ex, after), 30, "a submit to be accepted again")
    assert sink.wait(after.job_id).state is RunState.done

    # Every earlier job either reports a verdict or is declared vanished: none is stuck.
    def settled() -> tuple[list[str]] | None:
        open_ids = [j.job_id for j in before if j.job_id not in sink.results]
        vanished = ex.reconcile(open_ids)  # also delivers verdicts it finds
        return (vanished,) if sorted(vanished) == sorted(open_ids) else None

    [vanished] = wait_for(settled, 30, "every earlier job to be accounted for")
    for j in before:
        assert (j.job_id in sink.results) != (j.job_id in vanished)


def _submitted(ex, j) -> bool:  # type: ignore[no-untyped-def]
    try:
        ex.submit(j)
        return True
    except SubmitRefused:
        return False


def test_results_survive_a_consumer_restart(deployment: Deployment) -> None:
    from kplay.workers.celery_executor import CeleryExecutor

    deployment.start_worker("cpu@h")
    broken = RecordingSink(fail_results=True)
    first = deployment.executor(broken, consumer_name="web-1")
    lost_in_flight = job("ok")
    first.submit(lost_in_flight)
    wait_for(lambda: first._failures, 30, "the first consumer to fail on the verdict")
    first.stop()
    sender = CeleryExecutor(deployment.url, config=deployment.config)  # not consuming
    deployment.executors.append(sender)
    written_while_away = job("ok")
    sender.submit(written_while_away)
    wait_for(lambda: first.store.finished(written_while_away.job_id), 30, "the verdict")

    sink = RecordingSink()
    deployment.executor(sink, consumer_name="web-2", claim_idle_s=0.5)
    assert sink.wait(lost_in_flight.job_id).state is RunState.done
    assert sink.wait(written_while_away.job_id).state is RunState.done
