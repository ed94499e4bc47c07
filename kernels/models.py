"""Typed, staged job and result models.

The same JSON crosses the queue, the database and the page, so every model here
is a plain pydantic model with units in its field names.
"""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class RunState(StrEnum):
    queued = "queued"
    compiling = "compiling"
    checking = "checking"
    timing = "timing"
    done = "done"
    wrong = "wrong"
    compile_error = "compile_error"
    runtime_error = "runtime_error"
    timeout = "timeout"
    rejected = "rejected"
    # Checked and timed, but faster than the device it ran on allows: kept out of rankings.
    suspicious = "suspicious"
    # Compiled and never executed: nothing was checked or timed (CUDA C++ on a machine
    # without a GPU, or a run that asked to compile only). Never taken for correct.
    compiled = "compiled"

    @property
    def is_final(self) -> bool:
        return self in FINAL_STATES


FINAL_STATES = frozenset(
    {
        RunState.done,
        RunState.wrong,
        RunState.compile_error,
        RunState.runtime_error,
        RunState.timeout,
        RunState.rejected,
        RunState.suspicious,
        RunState.compiled,
    }
)

# "profile": the full run again under Nsight Compute, for a profile of the benchmark launch
# (workers/profiling.py); its result carries a ProfileStage and never a verdict of its own.
Mode = Literal["full", "check", "compile", "profile"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LaunchOverride(_Model):
    """What the learner chose for the launch; formulas of the case parameters.

    Any field left as None falls back to the source's `kplay:` directive, then to
    the problem's default for that backend.
    """

    grid: list[str] | None = None
    block: list[str] | None = None
    shared_mem_bytes: str | None = None
    num_warps: int | None = None
    num_stages: int | None = None
    constants: dict[str, str] = Field(default_factory=dict)


class GradingCase(_Model):
    """A test case beyond the problem's own, written in its problem.toml notation (`name`,
    `params`, `seed`): a grading run's hidden case. Checked after the problem's cases and
    reported without its parameters, sizes or message (kernels/hiddencases.py)."""

    name: str
    params: dict[str, int | float]
    seed: int = 0


class RunJob(_Model):
    job_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    problem: str
    backend: str
    source: str
    cell: str | None = None
    mode: Mode = "full"
    launch: LaunchOverride | None = None
    # The base of the problem's public seeds (each case adds its own). A real run ignores it
    # and draws secret seeds; public_seeds asks for the public ones instead, to show a
    # reader the failing case again (such a run is never verified: see RunResult.verified).
    seed: int = 0
    public_seeds: bool = False
    # A grading run's secret base seed (an assignment's hidden one), used instead of a base
    # drawn per run; like that one, never recorded in the result (kernels/seeds.py).
    secret_seed: int | None = None
    # A grading run's hidden cases, checked after the problem's own (kernels/hiddencases.py).
    hidden_cases: list[GradingCase] = Field(default_factory=list)
    # Upper bound on the time spent in the adaptive timing loop of one case.
    timing_cap_s: float = 0.3
    # The benchmark case to time, by name; None: the problem's first one for the backend.
    benchmark: str | None = None
    user: str | None = None
    # Where the job may run (distributed mode): a compute capability it needs, such as
    # "sm90", and a device model the user picked, such as "H200". None: any suitable.
    requires: str | None = None
    device: str | None = None


# ---------------------------------------------------------------- compile


class Diagnostic(_Model):
    line: int | None = None
    column: int | None = None
    severity: Literal["error", "warning", "note"] = "error"
    message: str


class Resources(_Model):
    kernel: str | None = None
    registers: int | None = None
    shared_bytes: int | None = None
    stack_frame_bytes: int | None = None
    spill_stores_bytes: int | None = None
    spill_loads_bytes: int | None = None
    constant_bytes: int | None = None
    arch: str | None = None


class CompileStage(_Model):
    ok: bool
    log: str = ""
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    resources: list[Resources] = Field(default_factory=list)
    ptx: str | None = None
    sass: str | None = None
    # The listings between the source and the PTX, by name in the order the compiler
    # lowers through them (Triton: ttir, ttgir, llir); empty where none were kept.
    ir: dict[str, str] = Field(default_factory=dict)
    compiler: str | None = None
    duration_ms: float | None = None


# ---------------------------------------------------------------- check


class CaseCheck(_Model):
    name: str
    params: dict[str, int | float]
    ok: bool
    output: str | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    mismatches: int = 0
    first_mismatch_index: list[int] | None = None
    expected: float | None = None
    got: float | None = None
    message: str | None = None
    # A 2-D output's wrong elements around the first one, as a text map (kernels.diagnose).
    grid: str | None = None
    # The seed of the inputs, only where it is public (RunJob.public_seeds); None for secret.
    seed: int | None = None
    # A grading run's hidden case: reported as right or wrong, with nothing of its shape.
    hidden: bool = False


class CheckStage(_Model):
    ok: bool
    cases: list[CaseCheck] = Field(default_factory=list)
    recheck_ok: bool | None = None
    message: str | None = None


# ---------------------------------------------------------------- timing


class ClockReading(_Model):
    sm_mhz: float | None = None
    mem_mhz: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None


class TimingStage(_Model):
    timed: bool
    untimed_reason: str | None = None
    case: str | None = None
    params: dict[str, int | float] = Field(default_factory=dict)
    median_us: float | None = None
    q1_us: float | None = None
    q3_us: float | None = None
    iqr_us: float | None = None
    mean_us: float | None = None
    stderr_us: float | None = None
    min_us: float | None = None
    reps: int | None = None
    rel_stderr: float | None = None
    l2_flushed: bool | None = None
    clocks_before: ClockReading | None = None
    clocks_after: ClockReading | None = None
    threads: int | None = None
    timer: str | None = None
    # With timer "cupti-kernels": the CUDA events' median over the same repetitions, the
    # cross-check the kernels' own stamps were held against (kernels.cuptitime).
    events_median_us: float | None = None
    # What the harness did around each repetition, outside the timed region: how many input
    # sets it rotated through, in how many sets of buffers, and how many outputs it checked.
    input_sets: int | None = None
    buffer_sets: int | None = None
    checked_reps: int | None = None
    checked_policy: str | None = None


# ---------------------------------------------------------------- roofline


class Ceilings(_Model):
    """One device's ceilings. Rates in FLOP/s and bytes/s."""

    device: str
    kind: Literal["gpu", "cpu"]
    source: Literal["calibrated", "datasheet"]
    copy_bytes_per_s: float | None = None
    read_bytes_per_s: float | None = None
    fp32_flops_per_s: float | None = None
    fp64_flops_per_s: float | None = None
    fp16_tc_flops_per_s: float | None = None
    bf16_tc_flops_per_s: float | None = None
    tf32_tc_flops_per_s: float | None = None
    fp8_tc_flops_per_s: float | None = None  # e4m3 x e4m3, fp32 accumulate (sm_89 and newer)
    measured_at: str | None = None
    notes: str | None = None
    # The calibration's own spread: the largest relative IQR (IQR / median) among the
    # timings it measured. None for datasheet figures and older calibrations.
    spread: float | None = None
    # Where the bandwidth ceilings were measured: "DRAM" when every buffer was at least
    # 4x the last-level cache (a CPU) or the L2 was flushed (a GPU); otherwise words saying
    # which cache may have served part of it. None for older calibrations.
    memory_level: str | None = None
    # Bytes of each buffer the bandwidth ceilings were measured over, and the last-level
    # cache (every instance together) of the CPU that measured them.
    memory_buffer_bytes: int | None = None
    llc_bytes: int | None = None


class RooflineStage(_Model):
    flops: float
    bytes: float
    intensity_flops_per_byte: float
    achieved_flops_per_s: float
    achieved_bytes_per_s: float
    memory_ceiling_bytes_per_s: float
    compute_ceiling_flops_per_s: float
    compute_ceiling_name: str
    ridge_flops_per_byte: float
    bound: Literal["memory", "compute"]
    attainable_flops_per_s: float
    percent_of_roofline: float
    ceilings_source: Literal["calibrated", "datasheet"]
    device: str
    baseline_median_us: float | None = None
    speedup_over_baseline: float | None = None
    # The memory level of the memory roof (Ceilings.memory_level) and, for a CPU, the
    # host's last-level cache, so the card can say where the case's bytes lived.
    memory_level: str | None = None
    llc_bytes: int | None = None

    @property
    def llc_multiple(self) -> float | None:
        """The case's bytes over the host's last-level cache (a CPU run)."""
        return self.bytes / self.llc_bytes if self.llc_bytes else None

    @property
    def note(self) -> str:
        """How to read the position: above the memory roof means a cache served the data."""
        if self.bound == "memory" and self.percent_of_roofline > 105:
            return "above the memory roof: the data came partly from cache"
        return f"{self.bound}-bound"


# ---------------------------------------------------------------- profile


class StallLine(_Model):
    line: int
    samples: int
    share_percent: float
    stalls: dict[str, int] = Field(default_factory=dict)  # reason -> samples, top first
    code: str = ""


class ProfileStage(_Model):
    """Nsight Compute's answer to "why is it slow", for the benchmark case's launch.

    Taken in the box with the learner's code (workers/profiling.py): advice about the
    learner's own kernel, never a verdict or a timing that a ranking takes.
    """

    kernel: str
    grid: str
    block: str
    duration_ms: float | None = None
    sm_ghz: float | None = None
    speed_of_light: dict[str, float] = Field(default_factory=dict)  # % of peak
    memory: dict[str, float] = Field(default_factory=dict)  # bytes and hit rates
    occupancy: dict[str, float] = Field(default_factory=dict)
    registers_per_thread: int | None = None
    stalls: list[dict[str, str | float]] = Field(default_factory=list)
    lines: list[StallLine] = Field(default_factory=list)
    advice: list[dict[str, str | float | None]] = Field(default_factory=list)
    seconds: float | None = None  # the profile's own wall time, ncu included
    report_bytes: int | None = None
    # The .ncu-rep itself, base64, on its way from the worker; the server keeps it apart
    # (app/services/records.py) and the stored result holds only its size.
    report_b64: str | None = None


# ---------------------------------------------------------------- system


class SystemInfo(_Model):
    kind: Literal["gpu", "cpu", "simulator", "compile-only"]
    device: str
    compute_capability: str | None = None
    driver: str | None = None
    cuda: str | None = None
    host: str | None = None
    cpu_count: int | None = None
    libraries: dict[str, str] = Field(default_factory=dict)
    # The public base seed where the run used the problem's public seeds; None where its
    # seeds were secret (drawn per run, never recorded).
    seed: int | None = 0
    seeds: Literal["public", "secret"] = "public"


class RunResult(_Model):
    job_id: str
    problem: str
    backend: str
    state: RunState
    message: str | None = None
    compile: CompileStage | None = None
    check: CheckStage | None = None
    timing: TimingStage | None = None
    roofline: RooflineStage | None = None
    system: SystemInfo | None = None
    output_tail: str | None = None
    wall_ms: float | None = None
    profile: ProfileStage | None = None
    # True only for a run that a ranking may take: done, timed on real hardware, on secret
    # seeds, every checked repetition right, and within the device's ceilings.
    verified: bool = False
    # For a run a limit or a crash ended from outside: the phase it was in then
    # (compiling, checking or timing), as its last progress event said.
    phase: RunState | None = None


class ProgressEvent(_Model):
    job_id: str
    state: RunState
    detail: str | None = None
