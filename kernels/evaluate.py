"""One evaluation: compile -> check -> time -> roofline, emitting progress as it goes.

`evaluate()` never raises for anything a learner can do wrong: every path ends in a
RunResult with a final state and a message that says what happened.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kplay.kernels import hiddencases as hidden
from kplay.kernels import launch as launch_mod
from kplay.kernels.arrays import ArrayOps
from kplay.kernels.backends.base import (
    Backend,
    Capability,
    CompiledKernel,
    DeferredCompileError,
    KernelError,
    get_backend,
)
from kplay.kernels.backends.pysource import learner_trace as _learner_trace
from kplay.kernels.catalog import get_problem
from kplay.kernels.check import InputError
from kplay.kernels.compiling import compile_boxed as _compile_boxed
from kplay.kernels.compiling import compile_cached as _compile_cached
from kplay.kernels.hardware import prepare_cpu_fallbacks
from kplay.kernels.models import (
    CaseCheck,
    CheckStage,
    CompileStage,
    Diagnostic,
    ProgressEvent,
    RunJob,
    RunResult,
    RunState,
    SystemInfo,
    TimingStage,
)
from kplay.kernels.perf import measure, withheld
from kplay.kernels.problem import ProblemSpec
from kplay.kernels.remote import BoxClient, BoxFailure, LearnerException
from kplay.kernels.seeds import RunSeeds
from kplay.kernels.shm import SharedArena
from kplay.kernels.sysinfo import system_info
from kplay.kernels.warmup import warm_up  # noqa: F401 - a worker child's warm-up target

Emit = Callable[[ProgressEvent], None]
_POISONED = False


def context_poisoned() -> bool:
    """True once a GPU error may have left this process's CUDA context unusable."""
    return _POISONED


class _Run:
    """Mutable state of one evaluation; keeps evaluate() itself short."""

    def __init__(self, job: RunJob, emit: Emit | None) -> None:
        self.job = job
        self.emit_fn = emit
        self.started = time.perf_counter()

    def emit(self, state: RunState, detail: str | None = None) -> None:
        if self.emit_fn is not None:
            self.emit_fn(ProgressEvent(job_id=self.job.job_id, state=state, detail=detail))

    def result(self, state: RunState, message: str | None = None, **stages: object) -> RunResult:
        return RunResult(
            job_id=self.job.job_id,
            problem=self.job.problem,
            backend=self.job.backend,
            state=state,
            message=message,
            wall_ms=(time.perf_counter() - self.started) * 1000.0,
            **stages,  # type: ignore[arg-type]
        )


def _signature_problem(kernel: CompiledKernel, problem: ProblemSpec) -> str | None:
    params = kernel.parameters()
    if params is None:
        return None
    expected = [a.name for a in problem.args]
    if len(params) != len(expected):
        return (
            f"the kernel takes {len(params)} parameter(s) ({', '.join(params) or 'none'}) but "
            f"the problem passes {len(expected)}: {', '.join(expected)}"
        )
    return None


def _resolve(job: RunJob, run: _Run) -> tuple[ProblemSpec, Backend, Capability] | RunResult:
    try:
        problem = get_problem(job.problem)
    except KeyError as exc:
        return run.result(RunState.rejected, str(exc.args[0]))
    if job.backend not in problem.backends:
        return run.result(
            RunState.rejected,
            f"problem {problem.slug!r} offers backends {', '.join(problem.backends)}; "
            f"not {job.backend!r}",
        )
    try:
        backend = get_backend(job.backend)
    except KeyError as exc:
        return run.result(RunState.rejected, str(exc.args[0]))
    cap = backend.capability()
    if cap is Capability.unavailable:
        return run.result(
            RunState.rejected, f"the {backend.title} backend cannot run or compile on this machine"
        )
    if not job.source.strip():
        return run.result(RunState.rejected, "the source is empty")
    if job.benchmark is not None:
        from kplay.kernels.perf import benchmark_cases

        names = [c.name for c in benchmark_cases(problem, backend.key)]
        if job.benchmark not in names:
            return run.result(
                RunState.rejected,
                f"problem {problem.slug!r} has no benchmark case {job.benchmark!r} for "
                f"{backend.title}; its cases are: {', '.join(repr(n) for n in names)}",
            )
    return problem, backend, cap


def evaluate(job: RunJob, emit: Emit | None = None, box: BoxClient | None = None) -> RunResult:
    """Compile, check, time and place one job.

    With `box` (what a worker gives every job), the learner's code runs only in that
    box: this process loads the artefacts it builds, or calls into it for host backends,
    and keeps inputs, checks and clocks to itself. Without it, the learner's module is
    loaded here, which only trusted code may do (tests, benchmarks, the library's API).
    """
    prepare_cpu_fallbacks()
    run = _Run(job, emit)
    resolved = _resolve(job, run)
    if isinstance(resolved, RunResult):
        return resolved
    problem, backend, cap = resolved
    run.emit(RunState.compiling)
    try:
        plan = launch_mod.plan(problem.launch[backend.key], job.source, job.launch)
    except launch_mod.LaunchError as exc:
        line = _line_of(str(exc))
        stage = CompileStage(
            ok=False, log=str(exc), diagnostics=[Diagnostic(line=line, message=str(exc))]
        )
        return run.result(RunState.compile_error, str(exc), compile=stage)
    # CUTLASS C++ is launched as CUDA C++ is (clusters, tensor maps), on the device's target.
    extras = plan.arch or (backend.key != "cutlass" and (plan.cluster or plan.tensor_maps))
    if backend.key != "cuda" and extras:
        message = (
            "arch=, cluster= and tma. in the launch line are for CUDA C++ cells; "
            f"{backend.title} chooses its own target and launch"
            if backend.key != "cutlass"
            else f"arch= is for CUDA C++ cells; {backend.title} is built for the device's target"
        )
        stage = CompileStage(
            ok=False,
            log=message,
            diagnostics=[Diagnostic(line=plan.directive_line, message=message)],
        )
        return run.result(RunState.compile_error, message, compile=stage)
    # Drawn here, in the harness, before the learner's module is loaded; never recorded.
    seeds = RunSeeds.for_job(job)
    with tempfile.TemporaryDirectory(prefix="kplay-") as tmp:
        return _evaluate_in(run, problem, backend, cap, plan, Path(tmp), seeds, box)


def _line_of(text: str) -> int | None:
    match = re.search(r"line (\d+)", text)
    return int(match.group(1)) if match else None


def _evaluate_in(
    run: _Run,
    problem: ProblemSpec,
    backend: Backend,
    cap: Capability,
    plan: launch_mod.LaunchPlan,
    workdir: Path,
    seeds: RunSeeds,
    box: BoxClient | None,
) -> RunResult:
    job = run.job
    backend.prepare_for(problem)  # the CuTe DSL builds for the problem's argument types
    if box is None:
        stage, kernel = _compile_cached(backend, job.source, plan.kernel, workdir)
    else:
        try:
            stage, kernel = _compile_boxed(backend, cap, job.source, plan.kernel, box)
        except (BoxFailure, LearnerException) as exc:
            return run.result(RunState.runtime_error, str(exc).splitlines()[0])
    system = system_info(backend, cap, seeds.base if seeds.public else None)
    if not stage.ok:
        first = stage.diagnostics[0].message if stage.diagnostics else "compilation failed"
        return run.result(RunState.compile_error, first, compile=stage, system=system)
    if kernel is None or cap is Capability.compile_only or job.mode == "compile":
        reason = backend.untimed_reason() or "compile-only run requested"
        message = (
            f"Compiled, not checked: this machine has no GPU to run {backend.title}, so "
            "whether the kernel is right is not known."
            if cap is Capability.compile_only
            else "Compiled, not checked: a compile-only run."
        )
        if kernel is None and plan.arch and cap is Capability.run and job.mode != "compile":
            reason = f"built for {plan.arch}, which this GPU ({system.device}) cannot run"
            message = (
                f"Compiled for {plan.arch}, not checked: this GPU cannot run that target. "
                "Architecture-specific code runs only on the compute capability it names."
            )
        return run.result(
            RunState.compiled,
            message,
            compile=stage,
            timing=TimingStage(timed=False, untimed_reason=reason),
            system=system,
        )
    mismatch = _signature_problem(kernel, problem)
    if mismatch:
        stage.diagnostics.append(Diagnostic(message=mismatch))
        return run.result(RunState.compile_error, mismatch, compile=stage, system=system)
    arena = box.arena if box is not None else None
    kernel_run = _KernelRun(run, problem, backend, cap, plan, kernel, stage, system, seeds, arena)
    return kernel_run.check_and_time()


@dataclass(frozen=True)
class _KernelRun:
    """A kernel that compiled, with everything the run resolved for it: checks it, times it."""

    run: _Run
    problem: ProblemSpec
    backend: Backend
    cap: Capability
    plan: launch_mod.LaunchPlan
    kernel: CompiledKernel
    stage: CompileStage
    system: SystemInfo
    seeds: RunSeeds
    arena: SharedArena | None = None  # host arrays in memory the learner's box shares

    def result(
        self,
        state: RunState,
        message: str,
        *,
        compile: CompileStage | None = None,
        **stages: object,
    ) -> RunResult:
        """The run's result with this kernel's compile stage and system attached."""
        stage = self.stage if compile is None else compile
        return self.run.result(state, message, compile=stage, system=self.system, **stages)

    def launch_for(self, params: dict[str, int | float]) -> Callable[[list[Any]], None]:
        """Launching the kernel with the grid and block the plan gives for `params`."""
        names = [(a.name, a.dtype) for a in self.problem.args]
        spec = launch_mod.resolve(self.plan, params, names)
        return lambda args: self.kernel.launch(args, spec)

    def check_and_time(self) -> RunResult:
        ops = ArrayOps(self.backend.array_kind(), self.arena)
        # An interpreted Triton kernel builds its GPU listings for a reader, not for a check.
        if hasattr(self.kernel, "build_listings"):
            self.kernel.build_listings = self.run.job.mode != "check"
        checked = self._check(ops)
        if isinstance(checked, RunResult):
            return checked
        if not checked.ok:
            bad = next(c for c in checked.cases if not c.ok)
            return self.result(RunState.wrong, f"case {bad.name}: {bad.message}", check=checked)
        if self.cap is not Capability.run:
            reason = self.backend.untimed_reason()
        elif self.run.job.mode == "check":
            reason = "check-only run"
        else:
            return self._time(ops, checked)
        return self.result(
            RunState.done,
            "Correct." + (f" Untimed: {reason}." if reason else ""),
            check=checked,
            timing=TimingStage(timed=False, untimed_reason=reason),
        )

    def _check(self, ops: ArrayOps) -> CheckStage | RunResult:
        """Every test case in order, up to the first wrong one; a result if the run ends here."""
        global _POISONED
        problem = self.problem
        self.run.emit(RunState.checking)
        cases: list[CaseCheck] = []
        skipped = 0
        try:
            tests = hidden.cases_of(problem, self.run.job)  # the problem's, then hidden ones
            for i, case in enumerate(tests):
                if self.cap is Capability.simulate and not case.simulate:
                    skipped += 1
                    continue
                self.run.emit(RunState.checking, f"case {case.name} ({i + 1}/{len(tests)})")
                check = hidden.check_case(problem, case, ops, self.launch_for, self.seeds)
                cases.append(check)
                if not check.ok:
                    break
            _merge_report(self.stage, self.kernel)
        except DeferredCompileError as exc:
            diagnostics = exc.stage.diagnostics
            first = diagnostics[0].message if diagnostics else "compile failed"
            return self.result(RunState.compile_error, first, compile=exc.stage)
        except (KernelError, launch_mod.LaunchError) as exc:
            return self.result(RunState.runtime_error, str(exc))
        except InputError as exc:
            return self.result(RunState.runtime_error, f"problem error: {exc}")
        except Exception as exc:  # noqa: BLE001 - the learner's kernel may raise anything
            if ops.on_gpu and not _from_box(exc):
                # Any failure on a GPU may leave a sticky error in the context: retire the child.
                _POISONED = True
            msg = _trace(exc)
            return self.result(
                RunState.runtime_error,
                msg.splitlines()[0],
                check=CheckStage(ok=False, cases=cases, message=msg),
            )
        note = f"{skipped} large case(s) skipped in the simulator" if skipped else None
        return CheckStage(ok=all(c.ok for c in cases), cases=cases, message=note)

    def _time(self, ops: ArrayOps, check_stage: CheckStage) -> RunResult:
        """Time the benchmark case, re-check it, place it on the roofline and judge the time."""
        global _POISONED
        self.run.emit(RunState.timing)
        try:
            measured = measure(
                self.problem, self.backend, self.kernel, self.plan, ops, self.run.job,
                self.launch_for, self.seeds,
            )  # fmt: skip
        except Exception as exc:  # noqa: BLE001
            if ops.on_gpu and not _from_box(exc):
                _POISONED = True
            return self.result(
                RunState.runtime_error, f"during timing: {_trace(exc)}", check=check_stage
            )
        timing, recheck = measured.timing, measured.recheck
        if measured.repetition is not None:
            check_stage.ok = False
            check_stage.recheck_ok = False
            check_stage.cases.append(measured.repetition)
            return self.result(
                RunState.wrong, measured.repetition.message or "", check=check_stage, timing=timing
            )
        check_stage.recheck_ok = recheck.ok
        if not recheck.ok:
            check_stage.ok = False
            check_stage.cases.append(recheck)
            return self.result(
                RunState.wrong,
                f"re-check after timing failed: {recheck.message}",
                check=check_stage,
                timing=withheld(timing, "the output of the re-check after timing was wrong"),
            )
        stages = {"check": check_stage, "timing": timing, "roofline": measured.roofline}
        if measured.too_fast is not None:
            reason = measured.too_fast
            message = (
                f"{reason[0].upper()}{reason[1:]}. The output was right, but a time beyond "
                "what the device allows is not verified, and no ranking takes it."
            )
            return self.result(RunState.suspicious, message, **stages)
        result = self.result(RunState.done, "Correct.", **stages)
        # Public seeds were known to the kernel; a time never judged proves nothing.
        result.verified = measured.judged and not self.seeds.public
        return result


def _from_box(exc: BaseException) -> bool:
    """An error the learner's box reported: this process's GPU context is untouched."""
    return isinstance(exc, BoxFailure | LearnerException)


def _trace(exc: BaseException) -> str:
    return exc.trace if isinstance(exc, LearnerException) else _learner_trace(exc)


def _merge_report(stage: CompileStage, kernel: CompiledKernel) -> None:
    """Fold what a lazy JIT learned at its first launch into the compile stage."""
    late = kernel.report()
    if late is None:
        return
    if late.resources and not stage.resources:
        stage.resources = late.resources
    stage.ptx = stage.ptx or late.ptx
    stage.sass = stage.sass or late.sass
    stage.ir = stage.ir or late.ir
