"""The run card's tier line: which of the problem's tiers a finished run reached and what the
next one needs, in words with the numbers, e.g. "silver: 60% of the memory roof needed — you
are at 39.9%".

Which tier a run reached is decided in one place, `progress.result_tier`; this module only
words it. A run that cannot be placed (compiled only, simulated, untimed, faster than the
device allows) gets a line saying why no tier can be given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kplay.app.services.progress import result_tier
from kplay.kernels.models import RooflineStage, RunResult, RunState
from kplay.kernels.problem import ProblemSpec, Tier


@dataclass(frozen=True)
class TierLine:
    # reached: the top tier; next: a tier reached or not, and one to go;
    # untiered: the problem has no tiers; none: no tier can be given for this run.
    key: str
    text: str
    tier: str | None = None  # the tier reached, by name


def shown(value: float) -> str:
    """A share as the line shows it: cut (never rounded up) to one decimal, so 59.96 % reads
    59.9 % under a 60 % bar rather than a 60.0 % that did not make it."""
    return f"{math.floor(value * 10) / 10:.1f}%"


def _roof(r: RooflineStage) -> str:
    return "the memory roof" if r.bound == "memory" else f"the {r.compute_ceiling_name} roof"


def _parts(problem: ProblemSpec, tier: Tier, r: RooflineStage) -> list[tuple[str, str]]:
    """(what the tier needs, where the run is) for each threshold of `tier`."""
    out = []
    if tier.percent_of_roofline is not None:
        out.append((f"{tier.percent_of_roofline:g}% of {_roof(r)}", shown(r.percent_of_roofline)))
    if tier.percent_of_baseline is not None:
        name = problem.baseline.name if problem.baseline else "the baseline"
        need = f"{tier.percent_of_baseline:g}% of the speed of {name}"
        have = r.speedup_over_baseline
        out.append((need, "no baseline time" if have is None else shown(100.0 * have)))
    return out


def _needs(problem: ProblemSpec, tier: Tier, r: RooflineStage) -> str:
    parts = _parts(problem, tier, r)
    need = " and ".join(n for n, _ in parts)
    have = " and ".join(h for _, h in parts)
    return f"{tier.name}: {need} needed — you are at {have}"


def _reached(problem: ProblemSpec, tier: Tier, r: RooflineStage) -> str:
    parts = _parts(problem, tier, r)
    have = " and ".join(f"{h} of {n.split(' of ', 1)[1]}" for n, h in parts)
    bars = " and ".join(n.split("%", 1)[0] + "%" for n, _ in parts)
    return f"{tier.name} reached: {have} ({tier.name} from {bars})"


def _no_tier(result: RunResult) -> str | None:
    """Why a correct-looking run cannot be given a tier; None when it can."""
    kind = result.system.kind if result.system else None
    timing = result.timing
    if result.state is RunState.suspicious:
        return "No tier: the time is faster than the device allows, so it is not counted."
    if result.state is RunState.compiled or kind == "compile-only" or result.check is None:
        return "No tier: the kernel was compiled, not run, so nothing was checked or timed."
    if not result.check.ok:
        return None
    if kind == "simulator":
        return "No tier: a simulated run is not timed; tiers are measured on real hardware."
    if timing is None or not timing.timed:
        why = timing.untimed_reason if timing and timing.untimed_reason else "no reason given"
        return f"No tier: the run was not timed ({why.rstrip('.')})."
    if result.roofline is None:
        return (
            "No tier: the run was timed but not placed on the roofline "
            "(this device has no ceilings)."
        )
    return None


def tier_line(problem: ProblemSpec | None, result: RunResult | None) -> TierLine | None:
    """The card's line for a final run; None for a run that failed (the verdict says it)."""
    if result is None or result.state not in (
        RunState.done,
        RunState.suspicious,
        RunState.compiled,
    ):
        return None
    if result.profile is not None:
        return None  # a profile run re-runs a passed one; the tier is on that run's card
    why = _no_tier(result)
    if why is not None:
        return TierLine("none", why)
    if result.check is None or not result.check.ok or result.roofline is None:
        return None
    if problem is None or not problem.tiers:
        return TierLine("untiered", "This problem has no tiers: a correct run is the goal.")
    r = result.roofline
    reached = result_tier(problem, result)
    place = problem.tiers.index(reached) if reached is not None else -1
    following = problem.tiers[place + 1] if place + 1 < len(problem.tiers) else None
    if reached is None:
        assert following is not None
        return TierLine("next", f"No tier yet. {_needs(problem, following, r)}.")
    if following is None:
        return TierLine("reached", f"{_reached(problem, reached, r)}. The top tier.", reached.name)
    text = f"{_reached(problem, reached, r)}. Next, {_needs(problem, following, r)}."
    return TierLine("next", text, reached.name)
