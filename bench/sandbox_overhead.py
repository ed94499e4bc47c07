"""What the evaluation sandbox costs: child start-up and per-job overhead, sandbox on and off.

    python bench/sandbox_overhead.py [--starts 5] [--jobs 50] [--engine-jobs 10] [--json OUT]

Three measures, each with KPLAY_SANDBOX=off and with bubblewrap (required):
- start-up: a pool of one warm child with a trivial target, from WorkerPool() to ready
  (the interpreter, bubblewrap's namespaces and mounts, the seccomp filter);
- per job, trivial target: pool.run() of a job that returns at once (the channel, the
  parent's CPU and memory accounting over the box, the sweep for leftover processes);
- per job, the real engine: the correct vector_add numba-cpu kernel in check mode, after a
  first job that compiles it (what a reader's run pays), and the engine child's start.
Prints one Markdown table; medians and 95th percentiles in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# Children import this module's `trivial` by name: the checkout must be on their path.
os.environ["PYTHONPATH"] = os.pathsep.join(
    filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])
)

from bench.benchlib import commit  # noqa: E402
from kplay.kernels.models import ProgressEvent, RunJob, RunResult, RunState  # noqa: E402
from kplay.workers.limits import Limits  # noqa: E402
from kplay.workers.runner import WorkerPool  # noqa: E402
from kplay.workers.sandbox import SandboxConfig  # noqa: E402

TARGET = "bench.sandbox_overhead:trivial"
ENGINE = "kplay.kernels.evaluate:evaluate"
# Both from the settings (KPLAY_SANDBOX_BWRAP names an unpacked bubblewrap), mode forced.
_SETTINGS = SandboxConfig.from_settings()
MODES = {
    "off": _SETTINGS.model_copy(update={"mode": "off"}),
    "bubblewrap": _SETTINGS.model_copy(update={"mode": "required"}),
}
for _name in os.environ.get("SANDBOX_BENCH_SKIP", "").split(","):
    MODES.pop(_name, None)


def trivial(job: RunJob, emit: Callable[[ProgressEvent], None]) -> RunResult:
    return RunResult(job_id=job.job_id, problem=job.problem, backend=job.backend, state="done")


def _ms(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p95 * 1000


def start_up(config: SandboxConfig, starts: int, target: str, limits: Limits) -> list[float]:
    samples = []
    for _ in range(starts):
        started = time.perf_counter()
        with WorkerPool(1, limits, target, sandbox=config) as pool:
            assert pool.wait_ready(limits.start_timeout_s + 10), "the child did not start"
            samples.append(time.perf_counter() - started)
    return samples


def per_job(config: SandboxConfig, jobs: list[RunJob], target: str, limits: Limits) -> list[float]:
    samples = []
    with WorkerPool(1, limits, target, sandbox=config) as pool:
        assert pool.wait_ready(limits.start_timeout_s + 10), "the child did not start"
        first = pool.run(jobs[0])  # compiles, imports what the job needs
        assert first.state is RunState.done, (first.message, first.output_tail)
        for job in jobs:
            started = time.perf_counter()
            result = pool.run(job)
            samples.append(time.perf_counter() - started)
            assert result.state is RunState.done, (result.message, result.output_tail)
    return samples


def engine_job() -> RunJob:
    from kplay.kernels.catalog import PROBLEMS_DIR

    source = PROBLEMS_DIR / "vector_add" / "solutions" / "correct" / "vector_add.numba_cpu.py"
    text = source.read_text()
    return RunJob(problem="vector_add", backend="numba-cpu", source=text, mode="check")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--engine-jobs", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    small = Limits(wall_timeout_s=30.0, start_timeout_s=60.0)
    engine = Limits(wall_timeout_s=60.0, start_timeout_s=180.0)
    rows: dict[str, dict[str, Any]] = {}
    for name, config in MODES.items():
        trivial_jobs = [RunJob(problem="vector_add", backend="numba-cpu", source="x")] * args.jobs
        rows[name] = {
            "start_trivial": _ms(start_up(config, args.starts, TARGET, small)),
            "job_trivial": _ms(per_job(config, trivial_jobs, TARGET, small)),
            "start_engine": _ms(start_up(config, max(1, args.starts // 2), ENGINE, engine)),
            "job_engine": _ms(per_job(config, [engine_job()] * args.engine_jobs, ENGINE, engine)),
        }
    labels = {
        "start_trivial": f"child start-up, trivial target ({args.starts} starts)",
        "job_trivial": f"one trivial job ({args.jobs} jobs)",
        "start_engine": f"child start-up, the engine ({max(1, args.starts // 2)} starts)",
        "job_engine": f"vector_add numba-cpu check, compiled ({args.engine_jobs} jobs)",
    }
    print(f"commit {commit()}, {platform.node()}, {platform.processor() or platform.machine()}")
    print("| measure | off: median (p95) ms | bubblewrap: median (p95) ms | added (median) |")
    print("|---|---|---|---|")
    for key, label in labels.items():
        off, box = rows["off"][key], rows["bubblewrap"][key]
        print(
            f"| {label} | {off[0]:.1f} ({off[1]:.1f}) | {box[0]:.1f} ({box[1]:.1f}) "
            f"| {box[0] - off[0]:+.1f} |"
        )
    if args.json is not None:
        args.json.write_text(json.dumps({"commit": commit(), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
