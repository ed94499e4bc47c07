"""Who may see a run: the one decision every page, fragment and API answer that shows a run
(its state, its verdict, its source) goes through, via `RunService.visible`.

A run is readable by its owner (the account, or the anonymous reader of a signed session,
that started it) and by an admin. A request for a run the viewer may not read is answered
exactly like one for a run that does not exist (404, "no run ..."), so run ids cannot be
probed.

A cohort's instructors read their learners' runs: that rule is `_teaches` below, and
nowhere else. It asks the viewer's `teaching` lookup (app.services.cohorts.Teaching, given to
an instructor's Viewer by app.accounts.viewer), which remembers its answers for the request.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from kplay.app.db.models import Run

ROLES = ("learner", "instructor", "admin")


class Viewer(str):
    """The owner name runs are stored under (`acct:<id>` for an account, the anonymous
    reader's name otherwise), carrying who is looking: the account and its role.

    It is a `str`, so everything that stores, counts or lists runs by owner takes it as it
    took the plain name; only `can_read` looks at the role.
    """

    account_id: int | None
    role: str | None
    email: str | None
    display_name: str | None
    # Whether this viewer teaches a given owner; None: teaches no one (not an instructor).
    teaching: Callable[[str], bool] | None

    def __new__(
        cls,
        owner: str,
        account_id: int | None = None,
        role: str | None = None,
        email: str | None = None,
        display_name: str | None = None,
    ) -> Viewer:
        viewer = super().__new__(cls, owner)
        viewer.account_id, viewer.role = account_id, role
        viewer.email, viewer.display_name = email, display_name
        viewer.teaching = None
        return viewer

    @property
    def signed_in(self) -> bool:
        return self.account_id is not None


def _role(viewer: str) -> str | None:
    return viewer.role if isinstance(viewer, Viewer) else None


def _teaches(viewer: str, owner: str) -> bool:
    """Whether `viewer` is an instructor member of a cohort where `owner` is a learner."""
    teaching = viewer.teaching if isinstance(viewer, Viewer) else None
    return teaching is not None and teaching(owner)


def can_read(run: Run, viewer: str) -> bool:
    """Whether `viewer` (an owner name, or a Viewer) may see `run`."""
    if hmac.compare_digest(run.user.encode(), viewer.encode()):
        return True
    role = _role(viewer)
    if role == "admin":
        return True
    return role == "instructor" and _teaches(viewer, run.user)
