"""Full timed runs of every correct GPU solution of every problem, through the engine.

Prints one Markdown row per solution: backend, median, IQR, reps, GB/s, GFLOP/s,
percent of roofline, speedup over the problem's library baseline.

    python bench/problem_runs.py [--problems sgemm,transpose] [--backends cuda,triton] [--boxed]

With --boxed each run goes through a learner box (kernels.learnerbox), as in a worker:
the box builds the kernel, this process loads, checks and times it. Without it, the
learner's module is loaded here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kplay.kernels.catalog import load_catalog  # noqa: E402
from kplay.kernels.evaluate import evaluate  # noqa: E402
from kplay.kernels.models import RunJob  # noqa: E402
from kplay.kernels.remote import spawn_plain_box  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problems", default="")
    parser.add_argument("--backends", default="cuda,numba-cuda,triton")
    parser.add_argument("--json-out", default="")
    parser.add_argument("--boxed", action="store_true")
    args = parser.parse_args()
    wanted = set(filter(None, args.problems.split(",")))
    backends = set(args.backends.split(","))
    rows, raw = [], []
    print(
        "| problem | solution | backend | case | state | median (µs) | IQR (µs) | reps | "
        "GB/s | GFLOP/s | % roofline | bound | x baseline |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for slug, spec in load_catalog().items():
        if wanted and slug not in wanted:
            continue
        for backend, path in spec.solutions("correct"):
            if backend not in backends:
                continue
            job = RunJob(problem=slug, backend=backend, source=path.read_text())
            if args.boxed:
                client, proc = spawn_plain_box()
                try:
                    r = evaluate(job, box=client)
                finally:
                    client.close()
                    proc.wait(timeout=60)
            else:
                r = evaluate(job)
            raw.append(json.loads(r.model_dump_json()))
            t, rl = r.timing, r.roofline
            med = f"{t.median_us:.1f}" if t and t.median_us else "-"
            iqr = f"{t.iqr_us:.1f}" if t and t.iqr_us is not None else "-"
            reps = str(t.reps) if t and t.reps else "-"
            gbs = f"{rl.achieved_bytes_per_s / 1e9:.0f}" if rl else "-"
            gfl = f"{rl.achieved_flops_per_s / 1e9:.0f}" if rl else "-"
            pct = f"{rl.percent_of_roofline:.1f}" if rl else "-"
            bound = rl.bound if rl else "-"
            spd = f"{rl.speedup_over_baseline:.2f}" if rl and rl.speedup_over_baseline else "-"
            case = t.case if t and t.case else "-"
            row = (
                f"| {slug} | {path.name} | {backend} | {case} | {r.state.value} | {med} | {iqr} | "
                f"{reps} | {gbs} | {gfl} | {pct} | {bound} | {spd} |"
            )
            if r.state.value != "done":
                row += f" {(r.message or '')[:160]}"
            print(row, flush=True)
            rows.append(row)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
