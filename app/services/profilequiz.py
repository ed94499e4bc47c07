"""A stored Nsight Compute profile and the questions a `kind: profile` cell asks of it.

The profile is a folder beside the chapter: `details.csv`, `raw.csv` and `source.csv`, the
three pages `ncu --import REPORT --csv` prints of a real report (the pages a profile run's
worker reads, kernels/ncuprofile.py), and `profile.toml` saying what was profiled (a
title, the device, and the problem and file of the kernel, for the code of its lines).

A question names a metric of the profile, optionally scaled, and how close an answer must
be; its answer is computed here from the pages, never typed into the chapter:

    sol:top                                    which speed-of-light unit is the fullest
    sol:<ncu's row name>                       that row's share of its peak, in %
    occupancy:<ncu's row name>                 e.g. occupancy:Achieved Occupancy
    memory:<key>                               dram_read_bytes, l2_hit_rate_pct, ...
    stall:top                                  the stall reason with the most cycles per issue
    stall:<reason>                             that reason's cycles per issued instruction
    line:top                                   the kernel's line with the most stall samples
    registers | duration_ms | sm_ghz           the launch's own figures

`occupancy:Achieved Occupancy * 0.64 within 0.5` asks for the warps resident per SM (64 slots
on Hopper) and takes answers within 0.5 of the computed value; `within 5%` takes a share.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kplay.kernels.models import ProfileStage
from kplay.kernels.ncuprofile import STALLS, ProfileFormatError, read_profile
from kplay.kernels.ncurun import profile_stage
from kplay.kernels.problem import ProblemSpec

PAGES = ("details", "raw", "source")
PROFILE_FILE = "profile.toml"
_TOLERANCE = re.compile(r"^(?P<value>\d+(?:\.\d+)?)\s*(?P<percent>%?)$")
_SPEC = re.compile(
    r"^(?P<metric>[a-z_]+(?::[^*/]+?)?)\s*"
    r"(?:(?P<op>[*/])\s*(?P<factor>\d+(?:\.\d+)?(?:e[+-]?\d+)?))?\s*"
    r"(?:within\s+(?P<tol>.+))?$"
)
SIMPLE = {"registers": "registers per thread", "duration_ms": "ms", "sm_ghz": "GHz"}


@dataclass(frozen=True)
class Tolerance:
    value: float
    relative: bool  # a share of the right value, in percent; else in the answer's own unit

    def allows(self, guess: float, right: float) -> bool:
        slack = abs(right) * self.value / 100 if self.relative else self.value
        # A hair more, for the decimal places a page shows.
        return abs(guess - right) <= slack + 1e-9 * max(1.0, abs(right))

    @property
    def words(self) -> str:
        return f"within {self.value:g}%" if self.relative else f"within {self.value:g}"


def parse_tolerance(text: str) -> Tolerance:
    found = _TOLERANCE.match(text.strip())
    if not found:
        raise ValueError(
            f"tolerance {text!r}: write a number, or a number and % (a share of the right "
            "value), such as 5 or 20%"
        )
    return Tolerance(float(found["value"]), bool(found["percent"]))


@dataclass(frozen=True)
class StoredProfile:
    folder: Path
    title: str
    device: str
    stage: ProfileStage


@dataclass(frozen=True)
class ProfileQuestion:
    id: str
    text: str
    metric: str
    # The computed answer: a number, or one of `choices` (server side only: never rendered).
    answer: float | str
    tolerance: Tolerance | None = None
    choices: tuple[tuple[str, str], ...] = field(default_factory=tuple)  # (value, words)

    @property
    def numeric(self) -> bool:
        return not self.choices

    def public(self) -> dict[str, object]:
        """What a page or the API may show of the question: never its answer."""
        return {
            "id": self.id,
            "text": self.text,
            "answer_kind": "number" if self.numeric else "choice",
            "tolerance": self.tolerance.words if self.tolerance else None,
            "choices": [{"value": v, "label": w} for v, w in self.choices],
        }

    def grade(self, given: str) -> bool:
        """Whether `given` is right; ValueError (in words) when it is not an answer at all."""
        given = given.strip()
        if not given:
            raise ValueError(f"{self.id}: no answer given")
        if not self.numeric:
            values = [v for v, _ in self.choices]
            if given not in values:
                raise ValueError(f"{self.id}: {given!r} is not one of the choices")
            return given == self.answer
        number = read_number(given)
        if number is None:
            raise ValueError(f"{self.id}: {given!r} is not a number")
        assert isinstance(self.answer, float)
        if self.tolerance is None:
            return number == self.answer
        return self.tolerance.allows(number, self.answer)


def read_number(text: str) -> float | None:
    """A learner's number: `18.1`, `18.1%`, `1,234`, `7e8`; None if it is not one."""
    cleaned = text.strip().rstrip("%").replace(",", "").replace("_", "").strip()
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def load_profile(folder: Path, problems: Mapping[str, ProblemSpec]) -> StoredProfile:
    """The stored profile in `folder`; ValueError in words when a piece is missing or wrong."""
    if not folder.is_dir():
        raise ValueError(f"there is no folder {folder}")
    missing = [f"{p}.csv" for p in PAGES if not (folder / f"{p}.csv").is_file()]
    if not (folder / PROFILE_FILE).is_file():
        missing.append(PROFILE_FILE)
    if missing:
        raise ValueError(f"{folder} lacks {', '.join(missing)}")
    try:
        meta = tomllib.loads((folder / PROFILE_FILE).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{PROFILE_FILE}: {exc}") from None
    for key in ("title", "device", "problem", "source"):
        if not isinstance(meta.get(key), str) or not meta[key].strip():
            raise ValueError(f"{PROFILE_FILE} needs {key!r} (text)")
    problem = problems.get(meta["problem"])
    if problem is None:
        raise ValueError(f"{PROFILE_FILE}: unknown problem {meta['problem']!r}")
    source_path = problem.folder / meta["source"]
    if not source_path.is_file():
        raise ValueError(f"{PROFILE_FILE}: problem {problem.slug!r} has no {meta['source']!r}")
    pages = [(folder / f"{p}.csv").read_text(encoding="utf-8") for p in PAGES]
    try:
        profile = read_profile(*pages)
    except (ProfileFormatError, KeyError) as exc:
        raise ValueError(f"the CSV pages are not an Nsight Compute export: {exc}") from None
    stage = profile_stage(profile, source_path.read_text(encoding="utf-8"))
    return StoredProfile(folder, meta["title"], meta["device"], stage)


def _real_stalls(stage: ProfileStage) -> list[dict[str, str | float]]:
    # "selected" is the warp issuing, not waiting: no answer to "what did it wait for".
    return [s for s in stage.stalls if s["reason"] != "selected"]


def _value(metric: str, stage: ProfileStage) -> tuple[float | str, tuple[tuple[str, str], ...]]:
    """(answer, choices) of one metric; choices empty for a number."""
    name, _, arg = metric.partition(":")
    arg = arg.strip()
    if name in SIMPLE and not arg:
        value = getattr(stage, "registers_per_thread" if name == "registers" else name)
        if value is None:
            raise ValueError(f"the profile has no {name}")
        return float(value), ()
    table = {"sol": stage.speed_of_light, "occupancy": stage.occupancy, "memory": stage.memory}
    if name in table and arg:
        rows = table[name]
        if name == "sol" and arg == "top":
            if not rows:
                raise ValueError("the profile has no speed-of-light rows")
            return max(rows, key=lambda k: rows[k]), tuple((k, k) for k in sorted(rows))
        if arg not in rows:
            raise ValueError(f"the profile has no {name} row {arg!r}; it has {', '.join(rows)}")
        return float(rows[arg]), ()
    if name == "stall" and arg:
        stalls = _real_stalls(stage)
        if arg == "top":
            if not stalls:
                raise ValueError("the profile has no stall reasons")
            # In alphabetical order: the profile's own order would give the answer away.
            names = sorted(str(s["reason"]) for s in stalls)
            choices = tuple((name, name.replace("_", " ")) for name in names)
            return str(stalls[0]["reason"]), choices
        found = [float(s["cycles_per_issue"]) for s in stalls if s["reason"] == arg]
        if not found:
            known = ", ".join(str(s["reason"]) for s in stalls)
            raise ValueError(f"the profile has no stall reason {arg!r}; it has {known}")
        return found[0], ()
    if name == "line" and arg == "top":
        if not stage.lines:
            raise ValueError("the profile has no source lines")
        return float(stage.lines[0].line), ()
    raise ValueError(
        f"unknown metric {metric!r}: use sol:, occupancy:, memory:, stall:, line:top, "
        f"{', '.join(SIMPLE)}"
    )


def question(question_id: str, text: str, stored: StoredProfile) -> ProfileQuestion:
    """A question from its line `<metric> [* or / factor] [within tol] | <words>`."""
    spec, sep, words = text.partition("|")
    if not sep or not words.strip():
        raise ValueError(f"write '<metric> | <the question in words>', got {text!r}")
    found = _SPEC.match(spec.strip())
    if not found:
        raise ValueError(f"{spec.strip()!r} is not '<metric> [* or / number] [within tolerance]'")
    metric = found["metric"]
    answer, choices = _value(metric, stored.stage)
    tolerance = parse_tolerance(found["tol"]) if found["tol"] else None
    if choices:
        if found["op"] or tolerance:
            raise ValueError(f"{metric} names one of several choices: no factor, no tolerance")
        return ProfileQuestion(question_id, words.strip(), metric, answer, None, choices)
    assert isinstance(answer, float)
    if found["op"]:
        factor = float(found["factor"])
        if factor == 0:
            raise ValueError("a factor of 0")
        answer = answer * factor if found["op"] == "*" else answer / factor
    if tolerance is None and answer != round(answer):
        raise ValueError(
            f"the answer ({answer:g}) is not a whole number: say how close an answer must "
            "be with 'within <tolerance>'"
        )
    return ProfileQuestion(question_id, words.strip(), metric, answer, tolerance)


def stall_words() -> dict[str, str]:
    """Each stall reason's sentence, for the choices' labels on a page."""
    return {reason: words for reason, (_counter, words) in STALLS.items()}
