"""What the dashboard knows of one learner on one exercise (`Cell`), read from the
per-pair aggregates by app/services/dashboard_cells.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from kplay.app.services.progress import CORRECT, RUNNING, UNTRIED, WRONG
from kplay.kernels.models import FINAL_STATES, RunState
from kplay.kernels.problem import Tier

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FAILED = tuple(sorted(s.value for s in FINAL_STATES if s is not RunState.done))
FINAL = tuple(sorted(s.value for s in FINAL_STATES))
Pair = tuple[str, str]  # (the learner's owner name, the exercise's cell id)


@dataclass
class Cell:
    """One learner on one exercise."""

    rank: int = UNTRIED
    tier: Tier | None = None
    runs: int = 0
    failed: int = 0
    done: int = 0
    first_at: datetime | None = None
    last_at: datetime | None = None
    changed_at: datetime = EPOCH  # the newest updated_at of its runs
    best_us: float | None = None
    # When its rank last rose: the first run that reached its best rank.
    progressed_at: datetime | None = None
    # When this process learned of its last change (see the module's docstring).
    seen_at: datetime = EPOCH
    # Failed runs by (state, message): how many, and the latest one's time.
    failures: dict[tuple[str, str | None], tuple[int, datetime]] = field(default_factory=dict)

    @property
    def key(self) -> str:
        if self.tier is not None:
            return "tier"
        return {UNTRIED: "untried", RUNNING: "running", WRONG: "wrong", CORRECT: "correct"}[
            self.rank
        ]


UNTOUCHED = Cell()
