"""Every backend's correct vector_add through the real engine, sandbox and learner box off and on.

    python bench/sandbox_backends.py [--problem vector_add] [--repeat 3] [--mode full]
        [--backends cuda,numba-cpu]

On a GPU host this is the check that CUDA (NVRTC and the nvcc report), Numba's CUDA target,
Triton (which builds its launcher with gcc in the child's cache) and Numba's LLVM JIT all
work inside bubblewrap and its system-call filter; on a CPU host it runs the simulator and
interpreter. For each backend and mode: the verdict, the first job (compiles, fills the
box's private caches) and the median of the repeats, in milliseconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.benchlib import commit  # noqa: E402
from kplay.kernels.catalog import PROBLEMS_DIR  # noqa: E402
from kplay.kernels.models import RunJob, RunResult  # noqa: E402
from kplay.workers.limits import Limits  # noqa: E402
from kplay.workers.runner import WorkerPool  # noqa: E402
from kplay.workers.sandbox import SandboxConfig  # noqa: E402

SUFFIXES = {"cuda": ".cu", "numba-cuda": ".numba_cuda.py", "triton": ".triton.py"}
SUFFIXES["numba-cpu"] = ".numba_cpu.py"
# Both from the settings (KPLAY_SANDBOX_BWRAP names an unpacked bubblewrap), mode forced.
_SETTINGS = SandboxConfig.from_settings()
MODES = {
    "in-process": (_SETTINGS.model_copy(update={"mode": "off"}), False),
    "off": (_SETTINGS.model_copy(update={"mode": "off"}), True),
    "bubblewrap": (_SETTINGS.model_copy(update={"mode": "required"}), True),
}
for _name in os.environ.get("SANDBOX_BENCH_SKIP", "").split(","):
    MODES.pop(_name, None)


def solution(problem: str, backend: str) -> str:
    folder = PROBLEMS_DIR / problem / "solutions" / "correct"
    return (folder / f"{problem}{SUFFIXES[backend]}").read_text()


def timed(pool: WorkerPool, job: RunJob) -> tuple[RunResult, float]:
    started = time.perf_counter()
    result = pool.run(job)
    return result, (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="vector_add")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--mode", default="full", choices=("check", "full"))
    parser.add_argument("--backends", default=",".join(SUFFIXES))
    args = parser.parse_args()
    limits = Limits(wall_timeout_s=120.0, start_timeout_s=180.0, cpu_seconds=240)
    print(f"commit {commit()}; {args.problem}, mode {args.mode}")
    print("| backend | mode | verdict | first job ms | next jobs p50 (p90) ms | kernel µs | note |")
    print("|---|---|---|---|---|---|---|")
    for name, (config, boxes) in MODES.items():
        with WorkerPool(1, limits, sandbox=config, learner_boxes=boxes) as pool:
            started = time.perf_counter()
            pool.wait_ready(limits.start_timeout_s)
            start_ms = (time.perf_counter() - started) * 1000
            print(f"| (child start) | {name} | | {start_ms:.0f} | | | |")
            for backend in args.backends.split(","):
                job = RunJob(
                    problem=args.problem,
                    backend=backend,
                    source=solution(args.problem, backend),
                    mode=args.mode,
                )
                first, first_ms = timed(pool, job)
                runs = [timed(pool, job) for _ in range(args.repeat)]
                rest = sorted(ms for _, ms in runs)
                p90 = rest[min(len(rest) - 1, int(0.9 * len(rest)))]
                kernel = [r.timing.median_us for r, _ in runs if r.timing and r.timing.median_us]
                kernel_us = f"{statistics.median(kernel):.1f}" if kernel else ""
                note = (first.message or "")[:90].replace("|", "/").replace("\n", " ")
                print(
                    f"| {backend} | {name} | {first.state.value} | {first_ms:.0f} "
                    f"| {statistics.median(rest):.0f} ({p90:.0f}) | {kernel_us} | {note} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
