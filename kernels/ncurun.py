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
from kplay.kernels.ncuprofile import Profile, read_profile
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
        raise ProfileError("Nsight Compute (ncu) is not installed here; a profile needs a GPU host")
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
        said = [ln for ln in done.stderr.splitlines() if "==" in ln]
        said += [ln for ln in done.stdout.splitlines() if '"message"' in ln or '"state"' in ln]
        detail = "; ".join(s.strip() for s in said[-4:]) or "no report written"
        raise ProfileError(f"ncu profiled no launch of the kernel ({detail})")
    pages = {}
    for name, args in PAGES.items():
        read = subprocess.run(
            [ncu, "--import", str(rep), "--csv", *args],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        if read.returncode:
            raise ProfileError(f"ncu could not read its report ({read.stderr.strip()[:200]})")
        pages[name] = read.stdout
    return read_profile(pages["details"], pages["raw"], pages["source"]), done.stdout
