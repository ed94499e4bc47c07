"""Running a command under Nsight Compute and reading its report back.

`kplay run --profile` runs the ordinary full run of a kernel under `ncu`, which profiles
the one launch the timing harness marks with an NVTX range (`perf.BENCHMARK_RANGE`, on
the benchmark case, after the warm-up launches that compile it). The clocks are left as
found, as the engine's own timing leaves them; ncu flushes the caches before each replay
pass. The report is kept for Nsight Compute's GUI and read into a `Profile` from three CSV
pages (`ncuprofile`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from kplay.kernels.backends.toolkit_find import find_tool
from kplay.kernels.models import ProfileStage, StallLine
from kplay.kernels.ncuprofile import Profile, ProfileFormatError, read_profile
from kplay.kernels.perf import BENCHMARK_RANGE

SECTIONS = (
    "SpeedOfLight",
    "MemoryWorkloadAnalysis",
    "MemoryWorkloadAnalysis_Chart",
    "Occupancy",
    "LaunchStats",
    "WarpStateStats",
    "SourceCounters",
    "ComputeWorkloadAnalysis",
)
PAGES = {
    "details": ("--page", "details"),
    "raw": ("--page", "raw"),
    "source": ("--page", "source", "--print-source", "cuda,sass"),
}


class ProfileError(RuntimeError):
    """The profile could not be taken; the message says why, in words."""


def find_ncu() -> str | None:
    found = find_tool("ncu")
    return str(found) if found else None


def profile_argv(ncu: str, report: Path, command: list[str]) -> list[str]:
    sections = [arg for name in SECTIONS for arg in ("--section", name)]
    return [
        ncu,
        "--nvtx",
        "--nvtx-include",
        f"{BENCHMARK_RANGE}/",
        "--launch-count",
        "1",
        "--target-processes",
        "all",
        "--clock-control",
        "none",
        *sections,
        "--force-overwrite",
        "--export",
        str(report),
        *command,
    ]


def take_profile(command: list[str], report: Path, timeout_s: float) -> tuple[Profile, str]:
    """Profile `command`; returns the profile and what the command printed."""
    ncu = find_ncu()
    if ncu is None:
        raise ProfileError(NO_NCU)
    rep = report.with_suffix(".ncu-rep")
    try:
        done = subprocess.run(
            profile_argv(ncu, report.with_suffix(""), command),
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired as exc:
        raise ProfileError(f"the profile took longer than its limit of {timeout_s:.0f} s") from exc
    if not rep.is_file():
        raise ProfileError(no_report(done.stdout, done.stderr))
    return read_report(ncu, rep, timeout_s), done.stdout


NO_NCU = "Nsight Compute (ncu) is not installed here; a profile needs a GPU host"


def no_report(stdout: str, stderr: str) -> str:
    """Why ncu wrote no report, from what it and the profiled run printed."""
    said = [ln for ln in stderr.splitlines() if "==" in ln]
    said += [ln for ln in stdout.splitlines() if '"message"' in ln or '"state"' in ln]
    detail = "; ".join(s.strip() for s in said[-4:]) or "no report written"
    return f"ncu profiled no launch of the kernel ({detail})"


def read_report(ncu: str, rep: Path, timeout_s: float) -> Profile:
    """The three CSV pages of a report, read into a Profile."""
    pages = {}
    for name, args in PAGES.items():
        try:
            read = subprocess.run(
                [ncu, "--import", str(rep), "--csv", *args],
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired as exc:
            raise ProfileError(f"ncu took over {timeout_s:.0f} s to read its report") from exc
        if read.returncode:
            raise ProfileError(f"ncu could not read its report ({read.stderr.strip()[:200]})")
        pages[name] = read.stdout
    try:
        return read_profile(pages["details"], pages["raw"], pages["source"])
    except ProfileFormatError as exc:
        raise ProfileError(f"the report's pages were not as expected: {exc}") from exc


def profile_stage(profile: Profile, source: str, top: int = 12) -> ProfileStage:
    """The Profile as the run's result carries it: the learner's lines with their code."""
    code = source.splitlines()
    total = sum(entry.samples for entry in profile.lines) or 1
    lines = [
        StallLine(
            line=entry.line,
            samples=entry.samples,
            share_percent=round(100 * entry.samples / total, 2),
            stalls=entry.stalls,
            code=code[entry.line - 1].strip()[:200] if 0 < entry.line <= len(code) else "",
        )
        for entry in profile.lines[:top]
    ]
    return ProfileStage(
        kernel=profile.kernel,
        grid=profile.grid,
        block=profile.block,
        duration_ms=profile.duration_ms,
        sm_ghz=profile.sm_ghz,
        speed_of_light=profile.speed_of_light,
        memory=profile.memory,
        occupancy=profile.occupancy,
        registers_per_thread=profile.registers_per_thread,
        stalls=profile.stalls[:8],
        lines=lines,
        advice=profile.advice[:5],
    )
