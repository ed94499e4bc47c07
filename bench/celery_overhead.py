"""What the distributed mode costs and what it survives, next to the embedded executor.

    python bench/celery_overhead.py [--latency-runs 50] [--stream-jobs 100] [--workers 1,2]
                                    [--kills 3] [--restarts 2] [--fault-jobs 40]

Measures, on this machine, with a trivial evaluation target (so only the plumbing is timed):
- submit -> verdict latency, one job at a time, LocalExecutor vs CeleryExecutor (p50, p95);
- jobs/s for a stream of small jobs with one and with two CPU workers;
- fault runs: workers SIGKILLed mid-job, and Redis restarted under a stream: runs that
  ended with a verdict, runs declared lost by reconcile(), runs left non-final.
Redis is a private redis-server on a free port (keeps nothing on disk), so restarts are
safe; prints one Markdown table per part.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Redis and Sink are also imported from here by bench/fleet_gpu.py.
from bench.celery_fleet import Fleet, Redis, Sink  # noqa: E402
from kplay.kernels.models import ProgressEvent, RunJob, RunResult, RunState  # noqa: E402

TARGET = "bench.celery_overhead:trivial"


def trivial(job: RunJob, emit: Callable[[ProgressEvent], None]) -> RunResult:
    """The evaluation stand-in: `ok` returns at once, `sleep:<s>` waits that long,
    `spin:<s>` keeps a CPU busy that long (work that a second worker can share)."""
    kind, _, arg = job.source.partition(":")
    if kind == "sleep":
        time.sleep(float(arg))
    elif kind == "spin":
        end = time.perf_counter() + float(arg)
        while time.perf_counter() < end:
            pass
    return RunResult(
        job_id=job.job_id, problem=job.problem, backend=job.backend, state=RunState.done
    )


# ---------------------------------------------------------------- plumbing
# (the Redis server, the verdict sink and the worker fleet are in bench/celery_fleet.py)


def _job(source: str = "ok") -> RunJob:
    return RunJob(problem="vector_add", backend="numba-cpu", source=source)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# ---------------------------------------------------------------- the parts


def latencies(submit: Callable[[RunJob], None], sink: Sink, runs: int) -> list[float]:
    out = []
    for i in range(runs + 1):
        job = _job()
        start = time.perf_counter()
        submit(job)
        if not sink.wait([job.job_id], 60):
            sys.exit("a latency job got no verdict in 60 s")
        if i:  # the first one warms the path
            out.append((sink.done[job.job_id][0] - start) * 1000.0)
    return out


def local_latency(runs: int) -> list[float]:
    from kplay.workers.limits import Limits
    from kplay.workers.local import LocalExecutor

    sink = Sink()
    ex = LocalExecutor(1, Limits(wall_timeout_s=30), target=TARGET)
    ex.start(sink)
    try:
        return latencies(ex.submit, sink, runs)
    finally:
        ex.stop()


def throughput(url: str, logs: Path, workers: int, jobs: int, spin_s: float = 0.0) -> float:
    fleet = Fleet(url, logs, TARGET)
    ex = fleet.start_executor()
    try:
        for i in range(workers):
            fleet.add_worker(f"cpu{i}@bench")
        latencies(ex.submit, fleet.sink, 1)  # warm every path once
        batch = [_job(f"spin:{spin_s}" if spin_s else "ok") for _ in range(jobs)]
        start = time.perf_counter()
        for job in batch:
            ex.submit(job)
        if not fleet.sink.wait([j.job_id for j in batch], 300):
            sys.exit("the stream did not finish in 300 s")
        end = max(fleet.sink.done[j.job_id][0] for j in batch)
        return jobs / (end - start)
    finally:
        fleet.close()


def account(fleet: Fleet, jobs: list[RunJob], settle_s: float) -> dict[str, int]:
    """Verdicts and runs left non-final after `settle_s`, handling lost runs as the app does.

    A run that reconcile() says exists nowhere any more is handed to the queue again (twice
    at most, as app/services/reconcile.py does from its database) before it counts as lost.
    """
    by_id = {j.job_id: j for j in jobs}
    requeued: dict[str, int] = {}
    deadline = time.monotonic() + settle_s
    lost: list[str] = []
    while True:
        open_ids = [i for i in by_id if i not in fleet.sink.done]
        try:
            vanished = fleet.executor.reconcile(open_ids) if open_ids else []
        except Exception:  # noqa: BLE001 - Redis may still be coming back
            vanished = []
        lost = []
        for job_id in vanished:
            if requeued.get(job_id, 0) < 2:
                try:
                    fleet.executor.submit(by_id[job_id])
                    requeued[job_id] = requeued.get(job_id, 0) + 1
                    continue
                except Exception:  # noqa: BLE001 - refused or Redis away: try next round
                    pass
            lost.append(job_id)
        if not open_ids or set(lost) == set(open_ids) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    states: dict[str, int] = {}
    for i in by_id:
        if i in fleet.sink.done:
            state = fleet.sink.done[i][1].state.value
            states[state] = states.get(state, 0) + 1
    states["queued again after vanishing"] = len(requeued)
    states["lost (ended by reconcile)"] = len(lost)
    states["non-final"] = len([i for i in open_ids if i not in lost])
    return states


def kill_run(url: str, logs: Path, kills: int, jobs: int, job_s: float) -> dict[str, int]:
    fleet = Fleet(url, logs, TARGET)
    ex = fleet.start_executor()
    try:
        fleet.add_worker("cpu-k0@bench")
        fleet.add_worker("cpu-k1@bench")
        batch = [_job(f"sleep:{job_s}") for _ in range(jobs)]
        for job in batch:
            ex.submit(job)
        for k in range(kills):
            busy = _wait_busy(ex, set(fleet.procs), 30)
            if busy is None:
                break
            fleet.kill(busy)
            fleet.add_worker(f"cpu-k{k + 2}@bench")
        return account(fleet, batch, 120 + jobs * job_s)
    finally:
        fleet.close()


def _wait_busy(ex: Any, alive: set[str], timeout_s: float) -> str | None:
    """A worker of `alive` that is running a job (a killed one may still be listed)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        busy = [w["id"] for w in ex.devices() if w.get("busy") and w["id"] in alive]
        if busy:
            return str(busy[0])
        time.sleep(0.05)
    return None


def restart_run(logs: Path, restarts: int, jobs: int, job_s: float) -> dict[str, int]:
    from kplay.workers.executor import SubmitRefused

    server = Redis()
    server.start()
    fleet = Fleet(server.url, logs, TARGET)
    ex = fleet.start_executor()
    accepted: list[RunJob] = []
    refused = 0
    try:
        fleet.add_worker("cpu-r@bench")
        every = max(1, jobs // (restarts + 1))
        for i in range(jobs):
            job = _job(f"sleep:{job_s}")
            try:
                ex.submit(job)
                accepted.append(job)
            except SubmitRefused:
                refused += 1
            if i % every == every - 1 and i // every < restarts:
                server.stop()
                time.sleep(0.5)
                server.start()
            time.sleep(job_s / 2)
        states = account(fleet, accepted, 60 + jobs * job_s)
        states["refused at submit"] = refused
        return states
    finally:
        fleet.close()
        server.stop()


# ---------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-runs", type=int, default=50)
    parser.add_argument("--stream-jobs", type=int, default=100)
    parser.add_argument("--workers", default="1,2", help="worker counts for the stream")
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--restarts", type=int, default=2)
    parser.add_argument("--fault-jobs", type=int, default=40)
    parser.add_argument("--job-s", type=float, default=0.2, help="length of a fault-run job")
    parser.add_argument(
        "--spin-s", type=float, default=0.0, help="CPU-bound work per stream job (0: trivial jobs)"
    )
    args = parser.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="kplay-bench-logs-"))

    server = Redis()
    server.start()
    try:
        local = local_latency(args.latency_runs)
        fleet = Fleet(server.url, logs, TARGET)
        ex = fleet.start_executor()
        fleet.add_worker("cpu-l@bench")
        try:
            remote = latencies(ex.submit, fleet.sink, args.latency_runs)
        finally:
            fleet.close()
        print(f"\n### Submit -> verdict latency, trivial job, {args.latency_runs} runs\n")
        print("| executor | p50 ms | p95 ms |\n|---|---|---|")
        for name, values in (("LocalExecutor", local), ("CeleryExecutor", remote)):
            print(f"| {name} | {statistics.median(values):.1f} | {_percentile(values, 0.95):.1f} |")

        what = f"jobs spinning a CPU for {args.spin_s:g} s" if args.spin_s else "trivial jobs"
        print(f"\n### Stream of {args.stream_jobs} {what}\n")
        print("| CPU workers | jobs/s |\n|---|---|")
        for n in (int(x) for x in args.workers.split(",")):
            rate = throughput(server.url, logs, n, args.stream_jobs, args.spin_s)
            print(f"| {n} | {rate:.1f} |")

        kills = kill_run(server.url, logs, args.kills, args.fault_jobs, args.job_s)
    finally:
        server.stop()
    restarts = restart_run(logs, args.restarts, args.fault_jobs, args.job_s)
    print(f"\n### Fault runs ({args.fault_jobs} jobs of {args.job_s:g} s each)\n")
    print("| run | outcome | runs |\n|---|---|---|")
    for title, states in (
        (f"{args.kills} worker kills (SIGKILL)", kills),
        (f"{args.restarts} Redis restarts", restarts),
    ):
        for outcome, count in states.items():
            print(f"| {title} | {outcome} | {count} |")
    print(f"\nworker logs: {logs}")


if __name__ == "__main__":
    main()
