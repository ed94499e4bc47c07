"""What the verdict's safeguards cost a warm GPU run, side by side with them switched off.

    python bench/trust_cost.py [--runs 40] [--problem vector_add] [--json-out FILE]

One process, one warm CUDA context, the problem's correct CUDA C++ solution with its compile
cached (as in a warm worker, where a cached GPU run needs no learner box). Alternates two
full runs (check every test case, time the first benchmark case, place it on the roofline):

- guarded: `evaluate()`, what a worker runs: secret seeds per run, outputs re-poisoned and
  inputs rotated before every timed repetition, a sample of timed outputs checked, the
  re-check after timing (last buffers, then fresh inputs), the plausibility judgement;
- unguarded: the same compile, the same checks of the test cases, then the benchmark case
  timed on one set of buffers with nothing between repetitions but the L2 flush, no
  re-check, no judgement, fixed public seeds (inputs memoised across runs).

The difference of the medians is the engine's share of the trust machinery. The worker's
share (signing the result and checking its signature on the web side) is timed apart, on a
result record of this run's size. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kplay.kernels import launch as launch_mod  # noqa: E402
from kplay.kernels.arrays import ArrayOps  # noqa: E402
from kplay.kernels.backends.base import get_backend  # noqa: E402
from kplay.kernels.catalog import get_problem  # noqa: E402
from kplay.kernels.check import prepare, run_case  # noqa: E402
from kplay.kernels.compiling import compile_cached  # noqa: E402
from kplay.kernels.evaluate import evaluate  # noqa: E402
from kplay.kernels.models import RunJob, RunState  # noqa: E402
from kplay.kernels.perf import _place, benchmark_case, ceilings_for_run  # noqa: E402
from kplay.kernels.timing import time_gpu  # noqa: E402
from kplay.workers.signing import Signer  # noqa: E402

FIXED_SEED = 1234


def unguarded(problem_slug: str, source: str, workdir: Path) -> float:
    """One run without the safeguards; returns its median kernel time in µs."""
    problem = get_problem(problem_slug)
    backend = get_backend("cuda")
    plan = launch_mod.plan(problem.launch[backend.key], source, None)
    stage, kernel = compile_cached(backend, source, plan.kernel, workdir)
    assert stage.ok and kernel is not None, stage.log
    ops = ArrayOps(backend.array_kind(), None)

    def launch_for(params):  # type: ignore[no-untyped-def]
        spec = launch_mod.resolve(plan, params)
        return lambda args: kernel.launch(args, spec)

    for case in problem.tests:
        check, _ = run_case(problem, case, ops, launch_for(case.params), FIXED_SEED, True)
        assert check.ok, check.message
    case = benchmark_case(problem, backend.key)
    prepared = prepare(problem, case, ops, FIXED_SEED, True)
    launch = launch_for(case.params)
    timing = time_gpu(
        lambda: launch(prepared.args), cap_s=RunJob.model_fields["timing_cap_s"].default
    )
    place = _place(problem, case, timing, ceilings_for_run(ops))
    assert place is not None
    return float(timing.median_us or 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--problem", default="vector_add")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    problem = get_problem(args.problem)
    source = next(p for b, p in problem.solutions("correct") if b == "cuda").read_text()
    job = RunJob(problem=args.problem, backend="cuda", source=source)
    walls: dict[str, list[float]] = {"guarded": [], "unguarded": []}
    kernel_us: dict[str, list[float]] = {"guarded": [], "unguarded": []}
    record = ""
    with tempfile.TemporaryDirectory() as tmp:
        # Warm both paths: the compile cache, the memo, the flusher, the draws' kernels.
        for _ in range(2):
            first = evaluate(job)
            assert first.state is RunState.done, first.message
            unguarded(args.problem, source, Path(tmp))
        for _ in range(args.runs):
            t0 = time.perf_counter()
            result = evaluate(job.model_copy(update={"job_id": job.job_id}))
            walls["guarded"].append((time.perf_counter() - t0) * 1e3)
            assert result.state is RunState.done, result.message
            kernel_us["guarded"].append(float(result.timing.median_us or 0.0))
            record = result.model_dump_json()
            t0 = time.perf_counter()
            kernel_us["unguarded"].append(unguarded(args.problem, source, Path(tmp)))
            walls["unguarded"].append((time.perf_counter() - t0) * 1e3)
    signer = Signer(b"k" * 64, "bench")
    t0 = time.perf_counter()
    n = 1000
    for _ in range(n):
        signature = signer.sign("result", job.job_id, record)
        assert signer.verify("result", job.job_id, record, signature)
    sign_ms = (time.perf_counter() - t0) * 1e3 / n
    out = {
        "problem": args.problem,
        "runs": args.runs,
        "wall_p50_ms": {k: round(statistics.median(v), 2) for k, v in walls.items()},
        "wall_p95_ms": {k: round(sorted(v)[int(0.95 * (len(v) - 1))], 2) for k, v in walls.items()},
        "kernel_p50_us": {k: round(statistics.median(v), 2) for k, v in kernel_us.items()},
        "sign_and_verify_ms": round(sign_ms, 4),
        "record_bytes": len(record),
    }
    out["engine_cost_p50_ms"] = round(
        out["wall_p50_ms"]["guarded"] - out["wall_p50_ms"]["unguarded"], 2
    )
    out["total_cost_p50_ms"] = round(out["engine_cost_p50_ms"] + sign_ms, 2)
    print("| path | wall p50 (ms) | wall p95 (ms) | kernel p50 (µs) |")
    print("|---|---|---|---|")
    for k in walls:
        print(
            f"| {k} | {out['wall_p50_ms'][k]} | {out['wall_p95_ms'][k]} | "
            f"{out['kernel_p50_us'][k]} |"
        )
    print(
        f"\nengine's safeguards: {out['engine_cost_p50_ms']} ms at p50; signing and checking "
        f"a {len(record)}-byte result: {sign_ms:.3f} ms; total {out['total_cost_p50_ms']} ms"
    )
    if args.json_out:
        args.json_out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
