"""The timed part of an evaluation: time the benchmark case, re-check it, place it, judge it.

Around every repetition the rotation (kernels.rotation) re-poisons the outputs, moves
another input set into the inputs and checks the output. The re-check runs twice after
timing: once on the buffers of the last timed launch (races and stale reads show up
under repetition) and once after fresh inputs, from another seed, were written into the
first buffers. Last, the time is compared with what the device allows
(kernels.plausibility).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kplay.kernels import formula, plausibility, roofline, timing
from kplay.kernels.arrays import ArrayOps
from kplay.kernels.backends.base import Backend, CompiledKernel
from kplay.kernels.check import expected_outputs, generate_inputs, verify
from kplay.kernels.launch import LaunchPlan
from kplay.kernels.models import CaseCheck, Ceilings, RooflineStage, RunJob, TimingStage
from kplay.kernels.problem import Case, ProblemSpec
from kplay.kernels.rotation import RepetitionFailed, Rotation
from kplay.kernels.seeds import RunSeeds

# The NVTX range around one launch of the learner's kernel on the benchmark case, which
# `kplay run --profile` hands to Nsight Compute.
BENCHMARK_RANGE = "kplay-benchmark"


def benchmark_cases(problem: ProblemSpec, backend_key: str) -> list[Case]:
    """The benchmark cases meant for this backend, in the problem's order."""
    return [c for c in problem.benchmarks if c.backends is None or backend_key in c.backends]


def benchmark_case(problem: ProblemSpec, backend_key: str, name: str | None = None) -> Case:
    """The case `name` (see RunJob.benchmark; checked by the caller), else the first one."""
    if name is not None:
        for case in benchmark_cases(problem, backend_key):
            if case.name == name:
                return case
    found = benchmark_cases(problem, backend_key)
    return found[0] if found else problem.benchmarks[0]


@dataclass
class Measured:
    """What the timed part found: the timing, its place, and anything that disqualifies it."""

    timing: TimingStage
    roofline: RooflineStage | None
    recheck: CaseCheck
    # A checked repetition whose output was wrong (the run is wrong), and the reason a
    # time is impossible on this device (the run is suspicious); None when neither.
    repetition: CaseCheck | None = None
    too_fast: str | None = None
    # Whether the time was compared with the device's ceilings at all (none known: no).
    judged: bool = False


def measure(
    problem: ProblemSpec,
    backend: Backend,
    kernel: CompiledKernel,
    plan: LaunchPlan,
    ops: ArrayOps,
    job: RunJob,
    launch_for: Callable[[dict], Callable[[list], None]],
    seeds: RunSeeds,
) -> Measured:
    from kplay.config import EngineSettings

    case = benchmark_case(problem, backend.key, job.benchmark)
    launch = launch_for(case.params)
    budget = EngineSettings().rotation_budget_bytes
    rotation = Rotation(problem, case, ops, launch, seeds, budget)
    try:
        if ops.on_gpu:
            stage = timing.time_gpu(
                rotation.launch,
                rotation.before_rep,
                cap_s=job.timing_cap_s,
                after_rep=rotation.after_rep,
                mark=BENCHMARK_RANGE,
            )
        else:
            stage = timing.time_cpu(
                rotation.launch,
                rotation.before_rep,
                cap_s=job.timing_cap_s,
                threads=getattr(kernel, "threads", None),
                after_rep=rotation.after_rep,
            )
    except RepetitionFailed as failed:
        return _wrong_repetition(rotation, case, failed.check)
    ops.synchronize()
    wrong_rep = rotation.failure()
    if wrong_rep is not None:
        return _wrong_repetition(rotation, case, wrong_rep)
    stage.case = case.name
    stage.params = dict(case.params)
    rotation.describe(stage)
    recheck = _recheck(problem, rotation, ops, launch, seeds, case)
    ceilings = ceilings_for_run(ops)
    place = _place(problem, case, stage, ceilings)
    measured = Measured(stage, place, recheck)
    if ceilings is not None and stage.median_us is not None:
        measured.judged = True
        measured.too_fast = _too_fast(problem, case, stage, ceilings, ops)
        if measured.too_fast is not None and not ops.on_gpu:
            from kplay.kernels.calibrate import remeasured_cpu

            # Ceilings measured on a busy machine read low: measure again before blaming the run.
            fresh = remeasured_cpu(ceilings)
            if fresh is not None:
                measured.roofline = place = _place(problem, case, stage, fresh)
                measured.too_fast = _too_fast(problem, case, stage, fresh, ops)
    if place is not None and ops.on_gpu and recheck.ok and measured.too_fast is None:
        prepared, _ = rotation.last_launch()
        _add_baseline(problem, case, prepared, ops, place, stage, job)
    return measured


# What a timing stage keeps when its numbers are withheld: how it was made, not what it found.
_KEPT = ("case", "params", "l2_flushed", "threads", "timer", "input_sets", "buffer_sets",
         "checked_reps", "checked_policy")  # fmt: skip


def withheld(timing: TimingStage | None, why: str) -> TimingStage | None:
    """`timing` without its numbers: the time of a run found wrong afterwards is no time."""
    if timing is None:
        return None
    kept = {k: v for k, v in timing.model_dump().items() if k in _KEPT}
    return TimingStage(timed=False, untimed_reason=why, **kept)


def _wrong_repetition(rotation: Rotation, case: Case, check: CaseCheck) -> Measured:
    """A run whose repetitions were not all right has no time worth showing."""
    stage = TimingStage(
        timed=False,
        untimed_reason="the output of a timed repetition was wrong",
        case=case.name,
        params=dict(case.params),
    )
    rotation.describe(stage)
    return Measured(stage, None, check, repetition=check)


def _recheck(
    problem: ProblemSpec,
    rotation: Rotation,
    ops: ArrayOps,
    launch: Callable[[list], None],
    seeds: RunSeeds,
    case: Case,
) -> CaseCheck:
    """The last timed launch's buffers, then fresh inputs in the first buffers, checked."""
    prepared, expected = rotation.last_launch()
    first = verify(problem, prepared, ops, expected)
    if not first.ok:
        first.name = f"{case.name} (after timing)"
        return first
    params = dict(case.params)
    fresh_seed = seeds.recheck(case)
    fresh = generate_inputs(problem, params, fresh_seed, seeds.memoise, rotation.xp)
    prepared = rotation.load_fresh(fresh, fresh_seed)
    launch(prepared.args)
    ops.synchronize()
    expected = expected_outputs(problem, params, fresh_seed, fresh, seeds.memoise)
    second = verify(problem, prepared, ops, expected)
    second.name = f"{case.name} (fresh inputs, same buffers)"
    return second


def ceilings_for_run(ops: ArrayOps) -> Ceilings | None:
    if ops.on_gpu:
        from kplay.kernels.hardware import current_gpu

        return roofline.ceilings_for(current_gpu().name)
    from kplay.kernels.calibrate import cpu_ceilings

    return cpu_ceilings()


def _too_fast(problem, case, stage, ceilings, ops) -> str | None:  # type: ignore[no-untyped-def]
    return plausibility.too_fast(
        float(formula.evaluate(problem.flops, case.params)),
        float(formula.evaluate(problem.bytes, case.params)),
        stage.median_us,
        ceilings,
        problem.compute_ceiling,
        cache_bytes=plausibility.cache_bytes(ops),
        extra=plausibility.margin(),
    )


def _place(problem, case, stage, ceilings) -> RooflineStage | None:  # type: ignore[no-untyped-def]
    if ceilings is None or stage.median_us is None:
        return None
    flops = float(formula.evaluate(problem.flops, case.params))
    nbytes = float(formula.evaluate(problem.bytes, case.params))
    return roofline.place(flops, nbytes, stage.median_us, ceilings, problem.compute_ceiling)


def _add_baseline(problem, case, prepared, ops, place, stage, job) -> None:  # type: ignore[no-untyped-def]
    baseline = getattr(problem.reference, "baseline", None)
    if baseline is None:
        return
    import cupy

    arrays = {name: cupy.array(ops.as_cupy(dev)) for name, dev in prepared.device.items()}
    for i, arg in enumerate(problem.args):
        if arg.role in ("scalar", "param"):
            arrays[arg.name] = prepared.args[i]
    params = dict(case.params)
    try:
        base = timing.time_gpu(lambda: baseline(arrays, params, cupy), cap_s=job.timing_cap_s)
    except Exception:  # noqa: BLE001 - a missing library path must not fail the learner's run
        return
    if base.median_us and stage.median_us:
        place.baseline_median_us = base.median_us
        place.speedup_over_baseline = base.median_us / stage.median_us
