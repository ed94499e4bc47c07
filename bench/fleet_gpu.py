"""The distributed mode on a GPU host: latency and throughput of real runs, one GPU worker.

    python bench/fleet_gpu.py [--latency-runs 30] [--stream-jobs 100] [--json-out FILE]

Starts a private redis-server on a free port, then `kplay worker --gpus 0` (the real
worker planner: one Celery worker pinned to GPU 0, plus the host's CPU worker), and
submits from this process through the web app's CeleryExecutor, as `kplay serve` does:
- submit -> final verdict of a full run (check on every case, time, re-check, roofline)
  of the `vector_add` CUDA solution whose compile is cached (the first run warms it),
  one job at a time: p50, p95, max;
- the same for a check-only run (what the page's "Check" button asks for);
- jobs per second for a stream of small jobs (check-only runs of vector_add, all
  submitted at once), and for a stream of full runs.
Needs a GPU, redis-server on PATH, and the device's ceilings in the cache (run
`kplay calibrate --kind gpu` first, or the worker measures them at start).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.celery_overhead import Redis, Sink, _percentile  # noqa: E402
from kplay.kernels.models import Mode, RunJob  # noqa: E402

SOLUTIONS = ROOT / "kernels" / "problems" / "vector_add" / "solutions" / "correct"
# backend -> (solution file, worker kind, `kplay worker` arguments). The CPU line exists to
# try the script on a machine without a GPU.
SETUPS = {
    "cuda": ("vector_add.cu", "gpu", ["--gpus", "0"]),
    "numba-cpu": ("vector_add.numba_cpu.py", "cpu", ["--cpu-only"]),
}


def _stats(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(statistics.median(values), 1),
        "p95_ms": round(_percentile(values, 0.95), 1),
        "max_ms": round(max(values), 1),
        "runs": len(values),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-runs", type=int, default=30)
    parser.add_argument("--stream-jobs", type=int, default=600)
    parser.add_argument("--full-stream-jobs", type=int, default=30)
    parser.add_argument("--backend", choices=sorted(SETUPS), default="cuda")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    filename, kind, worker_args = SETUPS[args.backend]

    from kplay.workers.celery_app import WorkerConfig
    from kplay.workers.celery_executor import CeleryExecutor

    server = Redis()
    server.start()
    prefix = f"kplaybench-{uuid.uuid4().hex[:8]}"
    logs = Path(tempfile.mkdtemp(prefix="kplay-fleet-gpu-"))
    env = {
        **os.environ,
        "KPLAY_BROKER_URL": server.url,
        "KPLAY_KEY_PREFIX": prefix,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    log = open(logs / "worker.log", "ab")  # noqa: SIM115 - lives as long as the worker
    worker = subprocess.Popen(
        [sys.executable, "-m", "kplay.cli", "worker", *worker_args],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    config = WorkerConfig(broker_url=server.url, key_prefix=prefix, user_run_cap=0)
    sink = Sink()
    ex = CeleryExecutor(server.url, config=config)
    ex.start(sink)
    out: dict[str, Any] = {"device": None}
    try:
        t0 = time.monotonic()
        while not any(w.get("kind") == kind for w in ex.devices()):
            if time.monotonic() - t0 > 300 or worker.poll() is not None:
                sys.exit(f"no {kind} worker came up; see {logs / 'worker.log'}")
            time.sleep(0.2)
        found = next(w for w in ex.devices() if w.get("kind") == kind)
        out["device"] = found.get("device")
        out["worker_start_s"] = round(time.monotonic() - t0, 1)
        source = (SOLUTIONS / filename).read_text()

        def one(mode: Mode) -> tuple[float, Any]:
            job = RunJob(problem="vector_add", backend=args.backend, source=source, mode=mode)
            start = time.perf_counter()
            ex.submit(job)
            if not sink.wait([job.job_id], 120):
                sys.exit(f"a {mode} run got no verdict in 120 s")
            done, result = sink.done[job.job_id]
            return (done - start) * 1000.0, result

        first_ms, first = one("full")
        out["first_full_run_ms"] = round(first_ms, 1)
        print(f"first full run (compiles): {first_ms:.0f} ms, state {first.state.value}")
        modes: tuple[Mode, Mode] = ("full", "check")
        for mode in modes:
            values, states = [], set()
            for _ in range(args.latency_runs):
                ms, result = one(mode)
                values.append(ms)
                states.add(result.state.value)
            out[f"latency_{mode}"] = {**_stats(values), "states": sorted(states)}
            if mode == "full" and result.timing is not None:
                out["kernel_median_us"] = result.timing.median_us
            print(f"{mode}: {out[f'latency_{mode}']}", flush=True)

        streams: tuple[tuple[Mode, int], ...] = (
            ("check", args.stream_jobs),
            ("full", args.full_stream_jobs),
        )
        for mode, count in streams:
            batch = [
                RunJob(problem="vector_add", backend=args.backend, source=source, mode=mode)
                for _ in range(count)
            ]
            start = time.perf_counter()
            for job in batch:
                ex.submit(job)
            if not sink.wait([j.job_id for j in batch], 600):
                sys.exit(f"the {mode} stream did not finish in 600 s")
            end = max(sink.done[j.job_id][0] for j in batch)
            seen = sorted({sink.done[j.job_id][1].state.value for j in batch})
            rate = count / (end - start)
            out[f"stream_{mode}"] = {"jobs": count, "jobs_per_s": round(rate, 1), "states": seen}
            print(f"stream of {count} {mode} runs: {rate:.1f} jobs/s, states {seen}", flush=True)
    finally:
        ex.stop()
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
        server.stop()
    print(json.dumps(out, indent=1))
    if args.json_out:
        args.json_out.write_text(json.dumps(out, indent=1))
    print(f"worker log: {logs / 'worker.log'}")


if __name__ == "__main__":
    main()
