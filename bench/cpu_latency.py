"""A cached numba-cpu full run through the worker, phase by phase (issue #14's bar).

    python bench/cpu_latency.py [--runs 30] [--mode full] [--fresh-learner] [--json-out FILE]

Starts a private redis-server on a free port and `kplay worker --cpu-only` (the real
worker planner, its sandbox and its learner boxes), then submits the correct
`vector_add.numba_cpu.py` through the web app's CeleryExecutor, one run at a time, as
one learner re-running the same source: the first run (which compiles) apart, then
`--runs` more. For each run it records when the submit returned and when each progress
event and the verdict arrived, and prints p50 / p95 of submit -> verdict and the median
of each phase:

- queue: submit -> `compiling` (Celery, the worker's hand-over, the box's readiness);
- compile: `compiling` -> `checking` (the box loads the source; Numba compiles it at the
  first launch, inside the first case);
- check: `checking` -> `timing` (the seven test cases);
- time: `timing` -> verdict (the timed repetitions, the re-check, the roofline, the
  signed result's trip back).

`--fresh-learner` names a new learner for every run, so that no box is reused: the cost
of a first run in a warm worker. Needs redis-server on PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.celery_fleet import Redis, Sink  # noqa: E402
from bench.fleet_gpu import _stats as _summary  # noqa: E402
from kplay.kernels.models import ProgressEvent, RunJob  # noqa: E402

SOLUTION = ROOT / "kernels/problems/vector_add/solutions/correct/vector_add.numba_cpu.py"
PHASES = (("queue", "submit", "compiling"), ("compile", "compiling", "checking"),
          ("check", "checking", "timing"), ("time", "timing", "verdict"))  # fmt: skip


class PhaseSink(Sink):
    """The verdicts, and when each job's first event of every state arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, dict[str, float]] = {}
        self._lock = threading.Lock()

    def on_event(self, event: ProgressEvent) -> None:
        now = time.perf_counter()
        with self._lock:
            self.seen.setdefault(event.job_id, {}).setdefault(event.state.value, now)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--mode", choices=("full", "check"), default="full")
    parser.add_argument("--fresh-learner", action="store_true")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    from kplay.workers.celery_app import WorkerConfig
    from kplay.workers.celery_executor import CeleryExecutor

    server = Redis()
    server.start()
    prefix = f"kplaybench-{uuid.uuid4().hex[:8]}"
    key = os.environ.get("KPLAY_RESULT_KEY") or secrets.token_hex(32)
    logs = Path(tempfile.mkdtemp(prefix="kplay-cpu-latency-"))
    env = {
        **os.environ,
        "KPLAY_BROKER_URL": server.url,
        "KPLAY_KEY_PREFIX": prefix,
        "KPLAY_RESULT_KEY": key,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    os.environ["KPLAY_RESULT_KEY"] = key  # the executor checks the verdicts' signatures
    log = open(logs / "worker.log", "ab")  # noqa: SIM115 - lives as long as the worker
    worker = subprocess.Popen(
        [sys.executable, "-m", "kplay.cli", "worker", "--cpu-only"],
        cwd=ROOT, env=env, stdout=log, stderr=log, start_new_session=True,
    )  # fmt: skip
    sink = PhaseSink()
    ex = CeleryExecutor(
        server.url, config=WorkerConfig(broker_url=server.url, key_prefix=prefix, user_run_cap=0)
    )
    ex.start(sink)
    source = SOLUTION.read_text()
    out: dict[str, Any] = {"mode": args.mode, "fresh_learner": args.fresh_learner}
    try:
        t0 = time.monotonic()
        while not any(w.get("kind") == "cpu" for w in ex.devices()):
            if time.monotonic() - t0 > 300 or worker.poll() is not None:
                sys.exit(f"no CPU worker came up; see {logs / 'worker.log'}")
            time.sleep(0.2)
        out["device"] = next(w for w in ex.devices() if w.get("kind") == "cpu").get("device")
        out["worker_start_s"] = round(time.monotonic() - t0, 1)

        def one(user: str) -> tuple[float, dict[str, float], Any]:
            job = RunJob(problem="vector_add", backend="numba-cpu", source=source,
                         mode=args.mode, user=user)  # fmt: skip
            start = time.perf_counter()
            ex.submit(job)
            if not sink.wait([job.job_id], 120):
                sys.exit(f"a run got no verdict in 120 s; see {logs / 'worker.log'}")
            done, result = sink.done[job.job_id]
            marks = {"submit": start, **sink.seen.get(job.job_id, {}), "verdict": done}
            phases = {
                name: (marks[b] - marks[a]) * 1000.0
                for name, a, b in PHASES
                if a in marks and b in marks
            }
            return (done - start) * 1000.0, phases, result

        learner = "bench-learner"
        first_ms, _, first = one(learner)
        out["first_run_ms"] = round(first_ms, 1)
        print(f"first run (compiles): {first_ms:.0f} ms, {first.state.value}", flush=True)
        totals: list[float] = []
        phases: dict[str, list[float]] = {name: [] for name, _, _ in PHASES}
        states: set[str] = set()
        kernel_us: list[float] = []
        for i in range(args.runs):
            user = f"bench-learner-{i}" if args.fresh_learner else learner
            ms, split, result = one(user)
            totals.append(ms)
            states.add(result.state.value)
            for name, value in split.items():
                phases[name].append(value)
            if result.timing is not None and result.timing.median_us is not None:
                kernel_us.append(result.timing.median_us)
            words = " ".join(f"{k} {v:.0f}" for k, v in split.items())
            print(f"run {i + 1}: {ms:.0f} ms, {result.state.value} ({words})", flush=True)
        out["latency"] = {**_summary(totals), "states": sorted(states)}
        out["phase_p50_ms"] = {k: round(statistics.median(v), 1) for k, v in phases.items() if v}
        if kernel_us:
            out["kernel_median_us"] = round(statistics.median(kernel_us), 1)
        out["load_average"] = [round(x, 2) for x in os.getloadavg()]
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
        args.json_out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"worker log: {logs / 'worker.log'}")


if __name__ == "__main__":
    main()
