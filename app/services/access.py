"""Who may see a run: the one decision every page, fragment and API answer that shows a run
(its state, its verdict, its source) goes through, via `RunService.visible`.

Today a run is readable by its owner only, the reader whose signed session started it. A
request for a run the viewer may not read is answered exactly like one for a run that does
not exist (404, "no run ..."), so run ids cannot be probed.

Later, a cohort's instructors will read their learners' runs: that rule belongs here, as a
second clause of `can_read` (the viewer is an instructor of a cohort the run's owner is in),
and nowhere else.
"""

from __future__ import annotations

import hmac

from kplay.app.db.models import Run


def can_read(run: Run, viewer: str) -> bool:
    """Whether `viewer` (an owner name, as runs are stored under) may see `run`."""
    return hmac.compare_digest(run.user.encode(), viewer.encode())
