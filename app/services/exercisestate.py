"""What a reader sees of an exercise of another kind: the measured value a prediction is
graded against, and each kind's standing (app.services.exercisekinds makes them)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kplay.app.db.models import Run
from kplay.app.services.cards import parse_result
from kplay.app.services.exercisespec import VERDICTS, PredictExercise
from kplay.app.services.records import is_final


def measured(ex: PredictExercise, run: Run) -> tuple[float | str | None, str]:
    """(the run's value of the predicted quantity, why there is none when None)."""
    if not is_final(run.state):
        return None, "the run has not finished yet"
    if ex.quantity == "verdict":
        if run.state in VERDICTS:
            return run.state, ""
        return None, f"the run ended {run.state.replace('_', ' ')}: no verdict to compare"
    result = parse_result(run)
    if result is None or run.state != "done":
        return None, "the run is not correct, so nothing was measured"
    timing, roof = result.timing, result.roofline
    if timing is None or not timing.timed:
        reason = (timing.untimed_reason if timing else None) or "it was not timed"
        return None, f"the run was not timed here: {reason}"
    value = {
        "median_us": timing.median_us,
        "gbps": roof.achieved_bytes_per_s / 1e9 if roof else None,
        "gflops": roof.achieved_flops_per_s / 1e9 if roof else None,
        "percent_of_roofline": roof.percent_of_roofline if roof else None,
    }[ex.quantity]
    if value is None or not math.isfinite(value):
        return None, "the run has no roofline point to read it from"
    return float(value), ""


def shown(ex: PredictExercise, value: float | str | None) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return VERDICTS.get(value, value)
    return f"{fmt_number(value)} {ex.unit}".strip()


def off_by(ex: PredictExercise, predicted: float, value: float) -> str:
    """How far the prediction was from the measurement, in words."""
    off = predicted - value
    side = "above" if off > 0 else "below"
    if ex.unit == "%":
        gap = f"{fmt_number(abs(off))} percentage points {side} the measurement"
    else:
        share = f" ({100 * abs(off) / value:.0f}%)" if value else ""
        gap = f"{fmt_number(abs(off))} {ex.unit}{share} {side} the measurement"
    return f"{gap}; {ex.tolerance_words} counts"


def fmt_number(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"


@dataclass
class PredictionState:
    """A predict cell's panel: the reader's latest prediction, the measured value, the grade."""

    prediction_id: int
    predicted: str
    locked: bool
    run_id: str | None
    measured: str = "—"
    within: bool | None = None  # None while there is nothing to compare
    note: str = ""

    def public(self) -> dict[str, Any]:
        return {
            "prediction": self.prediction_id,
            "predicted": self.predicted,
            "locked": self.locked,
            "run": self.run_id,
            "measured": self.measured,
            "within_tolerance": self.within,
            "note": self.note,
        }


@dataclass
class FixState:
    fixed: bool
    runs: int
    note: str

    def public(self) -> dict[str, Any]:
        return {"fixed": self.fixed, "runs": self.runs, "note": self.note}


@dataclass
class AnswersState:
    """A profile cell's panel: each question answered right or not (never the right answer)."""

    given: dict[str, str] = field(default_factory=dict)
    right: dict[str, bool] = field(default_factory=dict)
    total: int = 0

    @property
    def score(self) -> int:
        return sum(1 for ok in self.right.values() if ok)

    @property
    def solved(self) -> bool:
        return self.total > 0 and self.score == self.total

    def public(self) -> dict[str, Any]:
        return {
            "answers": [
                {"question": q, "given": self.given[q], "correct": self.right[q]}
                for q in sorted(self.given)
            ],
            "score": self.score,
            "total": self.total,
            "solved": self.solved,
        }
