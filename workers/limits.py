"""Resource limits for evaluation children, and the scrubbed environment they start with.

The parent builds the environment (`child_env`) and watches what can only be watched
from outside (wall clock, resident memory, output size). The child applies the limits
the kernel enforces for it (`apply_static_limits`, `set_cpu_budget`, `cap_address_space`).
"""

from __future__ import annotations

import os
import resource
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kplay.config import EngineSettings, WorkerSettings
from kplay.kernels.models import RunJob, RunResult, RunState
from kplay.workers.proctree import Usage

MIB = 1024 * 1024
# The defaults a pool shares with the settings that configure it (kplay.config).
_DEFAULTS = WorkerSettings.model_fields

# Variables copied from the parent when set. Nothing else crosses: a child never sees
# database or broker URLs, tokens or keys the server holds.
PASSED_NAMES = frozenset(
    {
        "PATH",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "TZ",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "CUDA_HOME",
        "CUDA_PATH",
        "LD_LIBRARY_PATH",
        "OMP_NUM_THREADS",
        # Where the operator keeps extra packages; the child imports `kplay` itself from the
        # installed package, never from a path added here.
        "PYTHONPATH",
    }
    # The engine's own settings (kplay.config.EngineSettings): none of them is a secret.
    | EngineSettings.env_names()
)
# KPLAY_ENGINE_ also carries engine variables the settings do not declare (a test's knobs).
PASSED_PREFIXES = ("NUMBA_", "TRITON_", "KPLAY_ENGINE_")

# Where each library keeps compiled artefacts; all of them are pointed into the cache dir
# whatever the parent said, so no child writes outside its own directories by default.
CACHE_VARIABLES = {
    "NUMBA_CACHE_DIR": "numba",
    "TRITON_CACHE_DIR": "triton",
    "TRITON_DUMP_DIR": "triton-dump",
    "TRITON_OVERRIDE_DIR": "triton-override",
    "CUPY_CACHE_DIR": "cupy",
    "CUDA_CACHE_PATH": "cuda-jit",
    "XDG_CACHE_HOME": "xdg",
}


class Limits(BaseModel):
    """What one evaluation may use. `None` switches a limit off."""

    model_config = ConfigDict(extra="forbid")

    # The whole job, compile to roofline; the child's process group is killed at the deadline.
    wall_timeout_s: float = Field(default=_DEFAULTS["job_timeout_s"].default, gt=0)
    # CPU seconds per job (RLIMIT_CPU, moved forward before each job in a warm child).
    cpu_seconds: int | None = Field(default=60, gt=0)
    # Host memory a job may add to its warm child (resident set growth, watched from the
    # parent through /proc). Measured from the job's start because the libraries and a
    # CUDA context already hold anywhere from 100 MiB to a few GiB before any job.
    memory_bytes: int | None = Field(default=4096 * MIB, gt=0)
    # RLIMIT_AS on top of the watchdog. CUDA reserves address space far beyond what it
    # touches, so "auto" uses it only where there is no CUDA GPU.
    address_space_limit: Literal["auto", "on", "off"] = "auto"
    # Scheduling niceness (0-19) the child starts with; learner code cannot lower it.
    niceness: int = Field(default=_DEFAULTS["child_nice"].default, ge=0, le=19)
    # Bytes a job may write to stdout and stderr together before it is stopped.
    output_bytes: int = Field(default=1 * MIB, gt=0)
    # How much of the end of that output comes back in RunResult.output_tail.
    output_tail_bytes: int = Field(default=8 * 1024, gt=0)
    # Largest single file a child may write (RLIMIT_FSIZE): a backstop for the disk.
    file_bytes: int | None = Field(default=256 * MIB, gt=0)
    # RLIMIT_NPROC counts every process and thread of the user account, not of the child,
    # so it only makes sense when workers run under an account of their own, or in the
    # sandbox, whose user namespace counts its own tasks (sandbox_max_tasks is used there).
    max_processes: int | None = Field(default=None, gt=0)
    # RLIMIT_NOFILE: open file descriptors per process.
    open_files: int | None = Field(default=4096, gt=0)
    # A warm child is replaced after this many jobs, so state one job left behind
    # cannot linger for long. 1 gives every job a fresh process.
    jobs_per_child: int | None = Field(default=_DEFAULTS["jobs_per_child"].default, gt=0)
    # How long a new child may take to import its libraries and warm up.
    start_timeout_s: float = Field(default=_DEFAULTS["child_start_timeout_s"].default, gt=0)
    # Shared compile caches; None gives each pool a private directory removed at close.
    cache_dir: Path | None = None
    # Extra variable names to copy from the parent, and fixed values to set.
    pass_env: list[str] = Field(default_factory=list)
    set_env: dict[str, str] = Field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: WorkerSettings, **overrides: object) -> Limits:
        """The limits `settings` configure (KPLAY_JOB_TIMEOUT_S and friends), then `overrides`."""
        values: dict[str, object] = {
            "wall_timeout_s": settings.job_timeout_s,
            "start_timeout_s": settings.child_start_timeout_s,
            "jobs_per_child": settings.jobs_per_child,
            "niceness": settings.child_nice,
        }
        return cls.model_validate({**values, **overrides})


def child_env(
    limits: Limits,
    home: Path,
    cache_dir: Path,
    parent: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The complete environment of a child: an allow-list, never a deny-list."""
    source = os.environ if parent is None else parent
    allowed = PASSED_NAMES | set(limits.pass_env)
    env = {
        name: value
        for name, value in source.items()
        if name in allowed or name.startswith(PASSED_PREFIXES)
    }
    env.setdefault("PATH", os.defpath)
    env["HOME"] = str(home)
    env["TMPDIR"] = str(home)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for name, sub in CACHE_VARIABLES.items():
        env[name] = str(cache_dir / sub)
    # Calibrated ceilings and compiled-kernel caches live in the user's cache folder,
    # which the child's private HOME would otherwise hide.
    cache_name = EngineSettings.env_name("cache_dir")
    if cache_name not in env:
        env[cache_name] = str(EngineSettings().cache_root())
    env.update(limits.set_env)
    return env


# ---------------------------------------------------------------- applied in the child


def apply_static_limits(limits: Limits) -> None:
    """Limits that hold for the child's whole life; called first thing in the child.

    Soft and hard alike: without privileges a process can lower its hard limits but never
    raise them again, so learner code cannot lift these for itself or for later jobs.
    """
    _set(resource.RLIMIT_CORE, 0)
    # Nicer, never less nice: an unprivileged process cannot take a lower niceness back
    # (RLIMIT_NICE is 0 for it), so neither can the learner's code after this.
    if limits.niceness > os.getpriority(os.PRIO_PROCESS, 0):
        os.setpriority(os.PRIO_PROCESS, 0, limits.niceness)
    if limits.file_bytes is not None:
        _set(resource.RLIMIT_FSIZE, limits.file_bytes)
    if limits.max_processes is not None:
        _set(resource.RLIMIT_NPROC, limits.max_processes)
    if limits.open_files is not None:
        _set(resource.RLIMIT_NOFILE, limits.open_files)


_jobs_budgeted = 0


def set_cpu_budget(limits: Limits) -> None:
    """Give the next job `cpu_seconds` more than the process has used so far.

    RLIMIT_CPU counts the whole life of the process; moving the soft limit before each
    job keeps a warm child's earlier jobs and warm-up from eating into the budget. Learner
    code may raise the soft limit up to the hard one, so the hard limit is the child's
    lifetime budget, `cpu_seconds` for each job it has left, lowered as it ages; and the
    parent measures every job's CPU time over all of the child's processes
    (`breached_limit`), which no code in the child can change.
    """
    global _jobs_budgeted
    if limits.cpu_seconds is None:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = int(usage.ru_utime + usage.ru_stime) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if limits.jobs_per_child is not None:
        left = max(1, limits.jobs_per_child - _jobs_budgeted)
        lifetime = used + limits.cpu_seconds * left
        hard = lifetime if hard == resource.RLIM_INFINITY else min(hard, lifetime)
    soft = used + limits.cpu_seconds
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    _jobs_budgeted += 1


def cap_address_space(limits: Limits, has_gpu: bool) -> int | None:
    """After warm-up: allow `memory_bytes` of address space beyond what is mapped now.

    Measured after warm-up because the libraries already reserve a good deal of
    address space they never touch. Returns the limit set, or None.
    """
    if limits.memory_bytes is None or limits.address_space_limit == "off":
        return None
    if limits.address_space_limit == "auto" and has_gpu:
        return None
    cap = vm_size_bytes(os.getpid()) + limits.memory_bytes
    _set(resource.RLIMIT_AS, cap)
    return cap


def _set(which: int, value: int) -> None:
    """Soft and hard limit to `value` (never above the hard limit already in force)."""
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


# ---------------------------------------------------------------- read from /proc


def rss_bytes(pid: int) -> int | None:
    """Resident set size of `pid`, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            fields = f.read().split()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")


def vm_size_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/statm", "rb") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def describe_bytes(n: int) -> str:
    if n >= MIB:
        return f"{n / MIB:.0f} MiB"
    return f"{n / 1024:.0f} KiB"


def signal_message(signum: int, limits: Limits) -> str:
    """A learner-readable sentence for a child that died of signal `signum`."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    text = (signal.strsignal(signum) or name).lower()
    if signum == signal.SIGXCPU and limits.cpu_seconds is not None:
        return f"{cpu_message(limits.cpu_seconds)} (signal {name})"
    if signum == signal.SIGXFSZ and limits.file_bytes is not None:
        size = describe_bytes(limits.file_bytes)
        return f"wrote a file larger than {size} (signal {name})"
    if signum == signal.SIGKILL:
        return (
            f"was killed with signal {name} ({text}), most likely because the machine ran "
            "out of memory"
        )
    return f"crashed with signal {name} ({text})"


def output_tail(path: Path, limit: int) -> str:
    """The last `limit` bytes of a child's output file, decoded leniently."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            f.seek(max(0, size - limit))
            data = f.read(limit)
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    if size > limit:
        text = f"[... {size - limit} earlier bytes not shown]\n" + text
    return text


def breached_limit(
    limits: Limits, output: Path, deadline: float, spent: Usage | None = None
) -> tuple[RunState, str] | None:
    """The limit a running child has broken, judged from outside it, or None.

    `spent` is what the job has used so far over all of the child's processes: CPU time
    and the growth of resident memory (read from /proc, as RLIMIT_AS cannot be used with
    CUDA; from the cgroup where the sandbox has one).
    """
    if spent is not None and limits.memory_bytes is not None:
        if spent.rss_bytes > limits.memory_bytes:
            words = describe_bytes(limits.memory_bytes)
            return RunState.runtime_error, f"used more than {words} of host memory"
    if spent is not None and limits.cpu_seconds is not None:
        if spent.cpu_s > limits.cpu_seconds:
            return RunState.timeout, cpu_message(limits.cpu_seconds)
    try:
        printed = output.stat().st_size
    except OSError:
        printed = 0
    if printed > limits.output_bytes:
        words = describe_bytes(limits.output_bytes)
        return RunState.runtime_error, f"printed more than {words} to stdout/stderr and was stopped"
    if time.monotonic() >= deadline:
        return RunState.timeout, (
            f"timed out after {limits.wall_timeout_s:g} s: the kernel or its launch did not "
            "finish (an endless loop, a deadlock, or far too much work)"
        )
    return None


def cpu_message(cpu_seconds: int) -> str:
    return f"timed out: used its {cpu_seconds} s of CPU time (the limit on CPU time)"


def death_state(signum: int) -> RunState:
    """What a child killed by `signum` ended as: the CPU-time limit's signal is a timeout."""
    return RunState.timeout if signum == signal.SIGXCPU else RunState.runtime_error


PHASE_WORDS = {
    RunState.compiling: "while compiling",
    RunState.checking: "while checking the test cases",
    RunState.timing: "while timing the benchmark case",
}


def failure_result(
    job: RunJob,
    message: str,
    state: RunState = RunState.runtime_error,
    phase: RunState | None = None,
) -> RunResult:
    """A final result for a job the evaluator did not finish; with the `phase` it was in,
    which the message then names ("... while checking the test cases")."""
    if phase in PHASE_WORDS:
        message = f"{message}, {PHASE_WORDS[phase]}"
    return RunResult(
        job_id=job.job_id,
        problem=job.problem,
        backend=job.backend,
        state=state,
        message=message,
        phase=phase,
    )
