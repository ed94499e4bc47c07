"""The timed part of an evaluation: time the benchmark case, re-check it, place it.

The re-check runs twice after timing: once on the outputs of the last timed launch
(races and stale reads show up under repetition) and once after fresh inputs were
written into the same buffers (a kernel that caches results by address fails).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kplay.kernels import formula, roofline, timing
from kplay.kernels.arrays import ArrayOps, scalar
from kplay.kernels.backends.base import Backend, CompiledKernel
from kplay.kernels.check import expected_outputs, generate_inputs, prepare, reset_outputs, verify
from kplay.kernels.launch import LaunchPlan
from kplay.kernels.models import CaseCheck, Ceilings, RooflineStage, RunJob, TimingStage
from kplay.kernels.problem import Case, ProblemSpec

RECHECK_SEED_OFFSET = 7919


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


def _copy(dst: Any, src: Any) -> None:
    dst[...] = src


def measure(
    problem: ProblemSpec,
    backend: Backend,
    kernel: CompiledKernel,
    plan: LaunchPlan,
    ops: ArrayOps,
    job: RunJob,
    launch_for: Callable[[dict], Callable[[list], None]],
) -> tuple[TimingStage, RooflineStage | None, CaseCheck]:
    case = benchmark_case(problem, backend.key, job.benchmark)
    prepared = prepare(problem, case, ops, job.seed + case.seed)
    launch = launch_for(case.params)
    originals = {
        a.name: ops.to_device(prepared.host_inputs[a.name])
        for a in problem.args
        if a.role == "inout"
    }
    zero_init = [prepared.device[n] for n in prepared.zero_init]

    def before_rep() -> None:
        for dev in zero_init:
            ops.fill(dev, 0)
        for name, orig in originals.items():
            _copy(prepared.device[name], orig)

    def run_once() -> None:
        launch(prepared.args)

    needs_reset = bool(zero_init or originals)
    if ops.on_gpu:
        stage = timing.time_gpu(
            run_once, before_rep if needs_reset else None, cap_s=job.timing_cap_s
        )
    else:
        stage = timing.time_cpu(
            run_once,
            before_rep if needs_reset else None,
            cap_s=job.timing_cap_s,
            threads=getattr(kernel, "threads", None),
        )
    stage.case = case.name
    stage.params = dict(case.params)
    ops.synchronize()
    recheck = _recheck(problem, prepared, ops, launch, job.seed + case.seed)
    place = _place(problem, case, stage, ops, backend)
    if place is not None and ops.on_gpu:
        _add_baseline(problem, case, prepared, ops, place, stage, job)
    return stage, place, recheck


def _recheck(problem, prepared, ops, launch, seed) -> CaseCheck:  # type: ignore[no-untyped-def]
    params = dict(prepared.case.params)
    expected = expected_outputs(problem, params, prepared.seed, prepared.host_inputs)
    first = verify(problem, prepared, ops, expected)
    if not first.ok:
        first.name = f"{prepared.case.name} (after timing)"
        return first
    fresh_seed = seed + RECHECK_SEED_OFFSET
    fresh = generate_inputs(problem, params, fresh_seed)
    for arg in problem.args:
        if arg.role in ("in", "inout"):
            ops.copy_from_host(prepared.device[arg.name], fresh[arg.name])
    prepared.host_inputs = fresh
    prepared.seed = fresh_seed
    for i, arg in enumerate(problem.args):
        if arg.role == "scalar":
            prepared.args[i] = scalar(fresh[arg.name], arg.dtype)
    reset_outputs(prepared, ops, problem)
    launch(prepared.args)
    ops.synchronize()
    second = verify(problem, prepared, ops, expected_outputs(problem, params, fresh_seed, fresh))
    second.name = f"{prepared.case.name} (fresh inputs, same buffers)"
    return second


def ceilings_for_run(ops: ArrayOps) -> Ceilings | None:
    if ops.on_gpu:
        from kplay.kernels.hardware import current_gpu

        return roofline.ceilings_for(current_gpu().name)
    from kplay.kernels.calibrate import cpu_ceilings

    return cpu_ceilings()


def _place(problem, case, stage, ops, backend) -> RooflineStage | None:  # type: ignore[no-untyped-def]
    ceilings = ceilings_for_run(ops)
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
