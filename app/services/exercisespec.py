"""The kinds of exercise a kernel cell can be, beyond "make it correct and fast".

A chapter's `kernel-cell` block names its kind with `kind:` and the options that kind needs:

- `kind: fix` — "fix this kernel": `starter:` names a file of the problem's
  `solutions/wrong/` folder, which the cell offers instead of the problem's starter, and
  `task:` says what is wrong in words the learner can act on. Solved by a correct run.
- `kind: predict` — "predict, then run": `question:` asks it, `predict:` names the quantity
  (one of QUANTITIES) and `tolerance:` how far off a prediction may be (`20%` of the measured
  value, or `5` in the quantity's own unit). The prediction is stored before the run starts.
- `kind: profile` — "read this profile": `profile:` names a folder beside the chapter that
  holds a stored Nsight Compute profile (app.services.profilequiz), and `question-1:`,
  `question-2:`, ... each ask one thing of it: `<metric> [within <tolerance>] | <words>`.
  The answers are computed from the profile when the book loads, never written by hand.

Every option is checked when the book loads; a mistake stops the book with the chapter's
file, the line and the cell's id (app.bookfront.BookError).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kplay.app.bookfront import BookError
from kplay.app.services.profilecard import ProfileView, profile_view
from kplay.app.services.profilequiz import (
    ProfileQuestion,
    StoredProfile,
    Tolerance,
    load_profile,
    parse_tolerance,
    question,
)
from kplay.kernels.problem import SUFFIXES as _SUFFIX
from kplay.kernels.problem import ProblemSpec

KINDS = ("fix", "predict", "profile")
# Each kind's own keys; `kind` itself is common to all.
KIND_KEYS = {
    "fix": ("starter", "task"),
    "predict": ("question", "predict", "tolerance"),
    "profile": ("profile",),
}
QUESTION_KEY = re.compile(r"^question-(\d{1,2})$")
# What a prediction may be about: the name a cell writes, the words the page shows, the unit.
QUANTITIES = {
    "gbps": ("achieved bandwidth", "GB/s"),
    "gflops": ("achieved throughput", "GFLOP/s"),
    "percent_of_roofline": ("share of the roofline", "%"),
    "median_us": ("median time", "µs"),
    "verdict": ("verdict", ""),
}
# The verdicts a prediction of `verdict` chooses from: a run's final state, in words.
VERDICTS = {
    "done": "correct",
    "wrong": "wrong answer",
    "compile_error": "compile error",
    "runtime_error": "runtime error",
    "timeout": "timed out",
}


def is_exercise_key(key: str) -> bool:
    """Whether `key` is one of the exercise options a kernel-cell may carry."""
    if key == "kind" or QUESTION_KEY.match(key):
        return True
    return any(key in keys for keys in KIND_KEYS.values())


@dataclass(frozen=True)
class FixExercise:
    starter_file: str
    starter_path: Path
    backend: str
    task: str
    # The wrong kernel as the learner gets it: without the comment that explains its bug.
    starter_text: str = ""
    kind: str = "fix"


def without_explanation(text: str, backend: str) -> str:
    """A wrong solution without its opening comment (which says what is wrong), keeping the
    `kplay:` launch lines of that comment: the learner must find the bug themselves."""
    mark = "#" if _SUFFIX[backend].endswith(".py") else "//"
    lines = text.splitlines(keepends=True)
    kept: list[str] = []
    at = 0
    while at < len(lines) and lines[at].lstrip().startswith(mark):
        body = lines[at].lstrip()[len(mark) :].strip()
        if body.startswith("kplay:"):
            kept.append(lines[at])
        at += 1
    return "".join(kept + lines[at:])


@dataclass(frozen=True)
class PredictExercise:
    question: str
    quantity: str
    tolerance: Tolerance | None  # None for the verdict: right or not
    kind: str = "predict"

    @property
    def label(self) -> str:
        return QUANTITIES[self.quantity][0]

    @property
    def unit(self) -> str:
        return QUANTITIES[self.quantity][1]

    @property
    def tolerance_words(self) -> str:
        """How far off a prediction may be, in words: "within 15 percentage points"."""
        tol = self.tolerance
        if tol is None:
            return ""
        if tol.relative:
            return f"within {tol.value:g}% of the measured value"
        unit = "percentage points" if self.unit == "%" else self.unit
        return f"within {tol.value:g} {unit}"

    @property
    def choices(self) -> list[tuple[str, str]]:
        return list(VERDICTS.items()) if self.quantity == "verdict" else []


@dataclass(frozen=True)
class ProfileExercise:
    profile: StoredProfile
    questions: tuple[ProfileQuestion, ...]
    kind: str = "profile"

    def find(self, question_id: str) -> ProfileQuestion | None:
        return next((q for q in self.questions if q.id == question_id), None)

    @property
    def view(self) -> ProfileView:
        """The stored profile as a run card's profile panel shows it (no report to download)."""
        return profile_view("stored", self.profile.stage, read_only=True)


Exercise = FixExercise | PredictExercise | ProfileExercise


def _tolerance(text: str, path: Path, line: int, where: str) -> Tolerance:
    try:
        return parse_tolerance(text)
    except ValueError as exc:
        raise BookError(path, line, f"{where}: {exc}") from None


def parse_exercise(
    fields: Mapping[str, tuple[str, int]],
    path: Path,
    start: int,
    cell_id: str,
    problem: ProblemSpec,
    backend: str,
    backends: tuple[str, ...],
    problems: Mapping[str, ProblemSpec],
) -> Exercise | None:
    """The cell's exercise, or None for an ordinary cell; BookError for any mistake."""
    where = f"kernel-cell {cell_id!r}"
    given = [k for k in fields if is_exercise_key(k) and k != "kind"]
    if "kind" not in fields:
        if given:
            key = given[0]
            raise BookError(
                path,
                fields[key][1],
                f"{where}: {key!r} is an option of an exercise cell; "
                f"say which kind with 'kind: {_kind_of(key)}'",
            )
        return None
    kind, kind_line = fields["kind"]
    if kind not in KINDS:
        raise BookError(path, kind_line, f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    for key in given:
        own = QUESTION_KEY.match(key) and kind == "profile"
        if not own and key not in KIND_KEYS[kind]:
            raise BookError(
                path,
                fields[key][1],
                f"{where}: {key!r} belongs to a cell of kind {_kind_of(key)!r}, not {kind!r}",
            )
    if kind == "fix":
        return _fix(fields, path, start, where, problem, backend, backends)
    if kind == "predict":
        return _predict(fields, path, start, where)
    return _profile(fields, path, start, where, problems)


def _kind_of(key: str) -> str:
    if QUESTION_KEY.match(key):
        return "profile"
    return next(kind for kind, keys in KIND_KEYS.items() if key in keys)


def _need(
    fields: Mapping[str, tuple[str, int]], key: str, path: Path, start: int, where: str, kind: str
) -> tuple[str, int]:
    value, line = fields.get(key, ("", start))
    if not value.strip():
        raise BookError(path, start, f"{where}: a cell of kind {kind!r} needs '{key}'")
    return value.strip(), line


def _fix(
    fields: Mapping[str, tuple[str, int]],
    path: Path,
    start: int,
    where: str,
    problem: ProblemSpec,
    backend: str,
    backends: tuple[str, ...],
) -> FixExercise:
    name, line = _need(fields, "starter", path, start, where, "fix")
    task, _ = _need(fields, "task", path, start, where, "fix")
    wrong = {p.name: (b, p) for b, p in problem.solutions("wrong")}
    if name not in wrong:
        known = ", ".join(sorted(wrong)) or "none"
        raise BookError(
            path,
            line,
            f"{where}: starter {name!r} is not a wrong solution of problem "
            f"{problem.slug!r} (solutions/wrong/ holds: {known})",
        )
    file_backend, file_path = wrong[name]
    if file_backend != backend or backends != (backend,):
        raise BookError(
            path,
            line,
            f"{where}: starter {name!r} is a {file_backend} kernel; a fix cell "
            f"offers that backend alone: write 'backend: {file_backend}' and "
            f"'backends: {file_backend}'",
        )
    starter = without_explanation(file_path.read_text(encoding="utf-8"), backend)
    return FixExercise(name, file_path, backend, task, starter)


def _predict(
    fields: Mapping[str, tuple[str, int]], path: Path, start: int, where: str
) -> PredictExercise:
    text, _ = _need(fields, "question", path, start, where, "predict")
    quantity, line = _need(fields, "predict", path, start, where, "predict")
    if quantity not in QUANTITIES:
        raise BookError(
            path,
            line,
            f"{where}: predict {quantity!r} is not a quantity a run measures; "
            f"use one of {', '.join(QUANTITIES)}",
        )
    tolerance = None
    if quantity == "verdict":
        if "tolerance" in fields:
            raise BookError(
                path,
                fields["tolerance"][1],
                f"{where}: a predicted verdict is right or wrong; leave 'tolerance' out",
            )
    else:
        tol_text, tol_line = _need(fields, "tolerance", path, start, where, "predict")
        tolerance = _tolerance(tol_text, path, tol_line, where)
    return PredictExercise(text, quantity, tolerance)


def _profile(
    fields: Mapping[str, tuple[str, int]],
    path: Path,
    start: int,
    where: str,
    problems: Mapping[str, ProblemSpec],
) -> ProfileExercise:
    folder, line = _need(fields, "profile", path, start, where, "profile")
    try:
        stored = load_profile(path.parent / folder, problems)
    except ValueError as exc:
        raise BookError(path, line, f"{where}: profile {folder!r}: {exc}") from None
    keys = sorted((int(m.group(1)), k) for k in fields if (m := QUESTION_KEY.match(k)) is not None)
    if not keys:
        raise BookError(path, start, f"{where}: a cell of kind 'profile' needs 'question-1'")
    if [n for n, _ in keys] != list(range(1, len(keys) + 1)):
        raise BookError(
            path, start, f"{where}: number the questions question-1, question-2, ... without gaps"
        )
    questions = []
    for number, key in keys:
        text, qline = fields[key]
        try:
            questions.append(question(f"q{number}", text, stored))
        except ValueError as exc:
            raise BookError(path, qline, f"{where}: {key}: {exc}") from None
    return ProfileExercise(stored, tuple(questions))
