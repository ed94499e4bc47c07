"""Where one evaluation's time goes, in process: wall time of repeated runs, and a profile.

    python bench/run_profile.py [--problem vector_add] [--backend cuda] [--runs 4]

Evaluates the problem's first correct solution for the backend with kernels.evaluate,
`--runs` times in full mode and as many in check mode (the first of each pays the
compile and fills the engine's memo of inputs and reference outputs), prints each run's
wall time, then profiles one more full run with cProfile and prints the 25 functions
with the most cumulative time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problem", default="vector_add")
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--runs", type=int, default=4)
    args = parser.parse_args()

    from kplay.kernels.catalog import get_problem
    from kplay.kernels.evaluate import evaluate, warm_up
    from kplay.kernels.models import Mode, RunJob

    problem = get_problem(args.problem)
    path = next(p for b, p in problem.solutions("correct") if b == args.backend)
    source = path.read_text()
    t0 = time.perf_counter()
    warm_up()
    print(f"warm_up: {1000 * (time.perf_counter() - t0):.0f} ms ({path.name})")

    def one(mode: Mode) -> float:
        job = RunJob(problem=args.problem, backend=args.backend, source=source, mode=mode)
        start = time.perf_counter()
        result = evaluate(job)
        ms = 1000 * (time.perf_counter() - start)
        reps = result.timing.reps if result.timing else None
        print(f"{mode}: {ms:.0f} ms, state {result.state.value}, timing reps {reps}", flush=True)
        return ms

    modes: tuple[Mode, Mode] = ("full", "check")
    for mode in modes:
        for _ in range(args.runs):
            one(mode)
    profiler = cProfile.Profile()
    profiler.enable()
    one("full")
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
    print(out.getvalue())


if __name__ == "__main__":
    main()
