"""The card of a run in flight, with what its timing bar needs.

A run's progress events carry no fraction of their own, so the bar is drawn from what the
card knows: the job's cap on the timing loop (`RunJob.timing_cap_s`) and how long ago the
run reached `timing`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kplay.app import format as fmt
from kplay.app.services.cards import RunCard


@dataclass
class LiveCard(RunCard):
    # The job's cap on its timing loop, and how long ago the run reached its current state.
    timing_cap_s: float | None = None
    state_age_s: float | None = None

    @property
    def live_detail(self) -> str:
        if self.state == "timing" and not self.detail and self.timing_cap_s:
            cap = fmt.duration_us(self.timing_cap_s * 1e6)
            return f"Repeating the kernel for at most {cap}, then checking its output once more."
        return super().live_detail

    @property
    def timing_percent(self) -> int:
        """How much of the timing budget has passed, 0 to 100.

        The bar is the time since the run reached `timing` over the job's cap on the timing
        loop. The loop's own length is not known in advance (it stops early once the times
        are steady) but it stops repeating once the cap has passed: the bar is full about
        when the loop must end, and the verdict follows once the output has been checked
        again. The page moves the bar on by the same rule, never back, and fills it when
        the verdict comes (static/js/playground.js, setBar).
        """
        if self.state != "timing" or not self.timing_cap_s or self.state_age_s is None:
            return 0
        return min(100, int(100 * self.state_age_s / self.timing_cap_s))


def live_card(card: RunCard, timing_cap_s: float, state_age_s: float) -> LiveCard:
    """`card` (in flight) with the facts of its timing bar."""
    fields = {f.name: getattr(card, f.name) for f in dataclasses.fields(RunCard)}
    return LiveCard(**fields, timing_cap_s=timing_cap_s, state_age_s=max(0.0, state_age_s))
