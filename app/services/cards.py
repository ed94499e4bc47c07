"""The run card's context: a Run row (and its result JSON) turned into what the card shows."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kplay.app import format as fmt
from kplay.app.db.models import Run
from kplay.app.services import memlevel
from kplay.app.services.cardnotes import says_nothing_new, untimed_label
from kplay.app.services.problems import backend_title
from kplay.app.services.profilecard import profile_view
from kplay.app.services.records import is_final
from kplay.app.services.tiers import tier_line
from kplay.kernels.models import CompileStage, Resources, RooflineStage, RunResult, RunState

STEPS = (
    ("queued", "Queued"),
    ("compiling", "Compile"),
    ("checking", "Check"),
    ("timing", "Time"),
)
VERDICTS = {
    "done": ("Correct", "ok"),
    "wrong": ("Wrong answer", "bad"),
    "compile_error": ("Compile error", "bad"),
    "runtime_error": ("Runtime error", "bad"),
    "timeout": ("Timed out", "bad"),
    "rejected": ("Rejected", "warn"),
    "suspicious": ("Faster than the device allows", "warn"),  # shown, never ranked
    "compiled": ("Compiled, not checked", "warn"),  # never executed: right or wrong unknown
}


@dataclass(frozen=True)
class Step:
    key: str
    label: str
    status: str  # done | active | failed | todo | skipped


@dataclass(frozen=True)
class Metric:
    label: str
    value: str
    note: str = ""


@dataclass(frozen=True)
class CaseRow:
    name: str
    params: str
    ok: bool
    message: str
    index: str
    expected: str
    got: str
    mismatches: int
    max_abs_err: str
    # A 2-D output's map of the wrong region (kernels.diagnose.grid), or "".
    grid: str = ""


@dataclass
class RunCard:
    run_id: str
    cell: str | None
    problem: str
    backend: str
    backend_title: str
    state: str
    final: bool
    created_at: str
    detail: str | None
    queue_position: int | None
    steps: list[Step]
    wait_s: float | None = None
    verdict: str = ""
    tone: str = "neutral"  # ok | bad | warn | neutral
    message: str | None = None
    untimed: str | None = None
    headline: list[Metric] = field(default_factory=list)
    speedups: list[Metric] = field(default_factory=list)
    diagnostics: list[dict[str, Any]] = field(default_factory=list)
    compile: CompileStage | None = None
    resources: list[Resources] = field(default_factory=list)
    cases_total: int = 0
    cases_passed: int = 0
    failing: list[CaseRow] = field(default_factory=list)
    check_message: str | None = None
    timing_rows: list[Metric] = field(default_factory=list)
    roofline_rows: list[Metric] = field(default_factory=list)
    chart: dict[str, Any] | None = None
    # A run only compiled: the cell's backends that could check it here (services.elsewhere).
    elsewhere: list[Any] = field(default_factory=list)
    system_rows: list[Metric] = field(default_factory=list)
    output_tail: str | None = None
    wall: str | None = None
    # Profiles (app/services/profilecard.py): this run's panel if it is a profile run; the
    # latest profile run of this one; whether the card offers the Profile button.
    profile: Any = None
    profile_of: str | None = None
    profile_card: Any = None
    can_profile: bool = False
    tier: Any = None  # the tier line (app/services/tiers.py), for a problem given to build_card

    @property
    def live_label(self) -> str:
        if self.state == "queued":
            return "Starting" if self.queue_position == 0 else "Waiting"
        return {"compiling": "Compiling", "checking": "Checking", "timing": "Timing"}.get(
            self.state, self.state.replace("_", " ").capitalize()
        )

    @property
    def live_detail(self) -> str:
        position = self.queue_position
        if self.state == "queued" and position:
            ahead = f"{position} run{'s' if position != 1 else ''} ahead in the queue"
            if self.wait_s:
                return f"{ahead}; about {fmt.duration_us(self.wait_s * 1e6)} to wait."
            return f"{ahead}."
        if self.state == "queued" and position == 0:
            return "A worker has taken the run."
        return self.detail or ""

    @property
    def json_diagnostics(self) -> dict[str, Any]:
        return {"cell": self.cell, "backend": self.backend, "diagnostics": self.diagnostics}


def parse_result(run: Run) -> RunResult | None:
    if not run.result:
        return None
    try:
        return RunResult.model_validate(run.result)
    except ValueError:
        # Stored by an older engine: show the verdict we have rather than fail the page.
        return RunResult(
            job_id=run.id,
            problem=run.problem,
            backend=run.backend,
            state=RunState(run.state),
            message=run.detail,
        )


def _failed_step(result: RunResult | None, state: str) -> str:
    if state == "rejected" or result is None:
        return "queued" if state == "rejected" else "compiling"
    if result.phase is not None and result.phase.value in dict(STEPS):
        return result.phase.value  # ended from outside (a limit, a crash) in this phase
    if result.compile is None or not result.compile.ok:
        return "compiling"
    if result.check is None or not result.check.ok:
        return "checking"
    return "timing"


def steps_for(state: str, result: RunResult | None) -> list[Step]:
    keys = [k for k, _ in STEPS]
    if not is_final(state):
        at = keys.index(state) if state in keys else 0
        status = ["done" if i < at else "active" if i == at else "todo" for i in range(len(keys))]
    elif state == "compiled":
        status = ["done", "done", "skipped", "skipped"]
    elif state == "done":
        # Simulated runs skip the timing; runs stored before `compiled` existed, the check too.
        checked = result is None or result.check is not None
        timed = result is None or (result.timing is not None and result.timing.timed)
        status = ["done", "done", "done" if checked else "skipped", "done" if timed else "skipped"]
    else:
        at = keys.index(_failed_step(result, state))
        status = ["done" if i < at else "failed" if i == at else "todo" for i in range(len(keys))]
    return [Step(k, label, s) for (k, label), s in zip(STEPS, status, strict=True)]


def _verdict(card: RunCard, result: RunResult | None) -> None:
    label, tone = VERDICTS.get(card.state, (card.state, "neutral"))
    if card.state == "done" and result is not None and result.check is None:
        label, tone = "Compiled, not run", "neutral"
    card.verdict, card.tone = label, tone
    message = (result.message if result else None) or card.detail
    # "Correct." under a "Correct" verdict says nothing twice; keep the card dense.
    if message and message.strip(" .").lower() == label.lower():
        message = None
    card.message = message


def _compile(card: RunCard, result: RunResult) -> None:
    stage = result.compile
    if stage is None:
        return
    card.compile = stage
    card.resources = list(stage.resources)
    card.diagnostics = [
        {"line": d.line, "column": d.column, "severity": d.severity, "message": d.message}
        for d in stage.diagnostics
    ]


def _num(value: float | None) -> str:
    if value is None:
        return "—"
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    return f"{value:.6g}"


def _check(card: RunCard, result: RunResult) -> None:
    stage = result.check
    if stage is None:
        return
    card.cases_total = len(stage.cases)
    card.cases_passed = sum(1 for c in stage.cases if c.ok)
    card.check_message = stage.message
    for case in stage.cases:
        if case.ok:
            continue
        card.failing.append(
            CaseRow(
                name=case.name,
                params=", ".join(f"{k}={v}" for k, v in case.params.items()),
                ok=case.ok,
                message=case.message or "",
                index=(
                    "[" + ", ".join(map(str, case.first_mismatch_index)) + "]"
                    if case.first_mismatch_index is not None
                    else "—"
                ),
                expected=_num(case.expected),
                got=_num(case.got),
                mismatches=case.mismatches,
                max_abs_err=_num(case.max_abs_err),
                grid=case.grid or "",
            )
        )


def _timing(card: RunCard, result: RunResult) -> None:
    if result.state in (RunState.done, RunState.compiled):
        card.untimed = untimed_label(result)
        reason = result.timing.untimed_reason if result.timing else None
        if card.untimed and card.message and says_nothing_new(card.message, card.verdict, reason):
            card.message = None
    t = result.timing
    if t is None or not t.timed:
        return
    card.headline.append(Metric("median", fmt.duration_us(t.median_us), t.case or ""))
    case = ", ".join(f"{k}={v}" for k, v in t.params.items())
    card.timing_rows = [
        Metric("case", f"{t.case or '—'}", case),
        Metric("median", fmt.duration_us(t.median_us)),
        Metric(
            "IQR",
            fmt.duration_us(t.iqr_us),
            f"{fmt.duration_us(t.q1_us)} – {fmt.duration_us(t.q3_us)}",
        ),
        Metric("mean ± stderr", f"{fmt.duration_us(t.mean_us)} ± {fmt.duration_us(t.stderr_us)}"),
        Metric("min", fmt.duration_us(t.min_us)),
        Metric("reps", str(t.reps) if t.reps is not None else "—"),
        Metric("timer", t.timer or "—", "L2 flushed per rep" if t.l2_flushed else ""),
    ]
    if t.events_median_us is not None:
        card.timing_rows.append(
            Metric("events' median", fmt.duration_us(t.events_median_us), "the timer's check")
        )
    if t.threads:
        card.timing_rows.append(Metric("threads", str(t.threads)))


def _bound_note(r: RooflineStage) -> str:
    return memlevel.bound_note(r)


def _roofline(card: RunCard, result: RunResult) -> None:
    r = result.roofline
    if r is None:
        return
    card.headline += [
        Metric("throughput", fmt.rate(r.achieved_flops_per_s, "FLOP/s")),
        Metric("bandwidth", fmt.rate(r.achieved_bytes_per_s, "B/s")),
        Metric("of roofline", fmt.percent(r.percent_of_roofline), _bound_note(r)),
    ]
    card.roofline_rows = [
        Metric("arithmetic intensity", f"{fmt.sig3(r.intensity_flops_per_byte)} FLOP/B"),
        Metric(
            "memory roof",
            fmt.rate(r.memory_ceiling_bytes_per_s, "B/s"),
            memlevel.roof_note(r),
        ),
        Metric(
            f"compute roof ({r.compute_ceiling_name})",
            fmt.rate(r.compute_ceiling_flops_per_s, "FLOP/s"),
        ),
        Metric("ridge", f"{fmt.sig3(r.ridge_flops_per_byte)} FLOP/B"),
        Metric("attainable here", fmt.rate(r.attainable_flops_per_s, "FLOP/s")),
        Metric("ceilings", r.ceilings_source, r.device),
    ]
    case = result.timing.case if result.timing else None
    card.roofline_rows += [Metric(*row) for row in memlevel.case_rows(r, result.problem, case)]
    if r.speedup_over_baseline is not None:
        baseline = fmt.duration_us(r.baseline_median_us)
        card.speedups.append(
            Metric("vs baseline", fmt.ratio(r.speedup_over_baseline), f"baseline {baseline}")
        )


def _system(card: RunCard, result: RunResult) -> None:
    s = result.system
    rows: list[Metric] = []
    if s is not None:
        rows += [Metric("device", s.device, s.kind)]
        for label, value in (
            ("compute capability", s.compute_capability),
            ("driver", s.driver),
            ("CUDA", s.cuda),
            ("host", s.host),
            ("CPUs", str(s.cpu_count) if s.cpu_count else None),
            ("seed", "secret, drawn for this run" if s.seed is None else str(s.seed)),
        ):
            if value:
                rows.append(Metric(label, value))
        rows += [Metric(name, version) for name, version in sorted(s.libraries.items())]
    t = result.timing
    for label, clock in (
        ("clocks before", t and t.clocks_before),
        ("clocks after", t and t.clocks_after),
    ):
        if clock:
            parts = [
                f"SM {clock.sm_mhz:.0f} MHz" if clock.sm_mhz else "",
                f"mem {clock.mem_mhz:.0f} MHz" if clock.mem_mhz else "",
                f"{clock.temperature_c:.0f} °C" if clock.temperature_c is not None else "",
                f"{clock.power_w:.0f} W" if clock.power_w is not None else "",
            ]
            rows.append(Metric(label, ", ".join(p for p in parts if p) or "—"))
    card.system_rows = rows


def build_card(
    run: Run, queue_position: int | None = None, previous: Run | None = None, problem: Any = None
) -> RunCard:
    """`previous`: the cell's timed run before this one on the same device, for a speedup;
    `problem`: the run's ProblemSpec, for the tier line."""
    result = parse_result(run) if is_final(run.state) else None
    card = RunCard(
        run_id=run.id,
        cell=run.cell_id,
        problem=run.problem,
        backend=run.backend,
        backend_title=backend_title(run.backend),
        state=run.state,
        final=is_final(run.state),
        created_at=fmt.iso(run.created_at),
        detail=run.detail,
        queue_position=queue_position,
        steps=steps_for(run.state, result),
    )
    if not card.final:
        return card
    _verdict(card, result)
    if result is None:
        return card
    _compile(card, result)
    if card.diagnostics and card.message == card.diagnostics[0]["message"]:
        card.message = None  # the diagnostics list shows it, with its line
    _check(card, result)
    _timing(card, result)
    _roofline(card, result)
    _system(card, result)
    card.output_tail = result.output_tail or None
    card.wall = fmt.duration_us(result.wall_ms * 1000) if result.wall_ms else None
    card.profile_of = run.profile_of
    card.tier = tier_line(problem, result)
    if result.profile is not None:
        card.profile = profile_view(run.id, result.profile)
        card.verdict = "Profiled under Nsight Compute"
    card.can_profile = (
        run.profile_of is None
        and run.backend != "numba-cpu"
        and run.state in (RunState.done.value, RunState.suspicious.value)
    )
    prev = parse_result(previous) if previous is not None else None
    if prev and prev.timing and prev.timing.median_us and result.timing and result.timing.median_us:
        speedup = prev.timing.median_us / result.timing.median_us
        card.speedups.append(
            Metric(
                "vs previous run",
                fmt.ratio(speedup),
                f"was {fmt.duration_us(prev.timing.median_us)}",
            )
        )
    return card
