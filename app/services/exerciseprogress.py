"""Progress in the cells a reader answers rather than runs: a stored profile's questions
(app.services.exercisekinds). A cell is solved once the latest answer to each of its questions
is right; each check of the answers counts as one attempt."""

from __future__ import annotations

from sqlalchemy import select

from kplay.app.db.exercisemodels import ProfileAnswer
from kplay.app.db.session import Database


def answered_cells(db: Database, user: str) -> dict[str, tuple[bool, int]]:
    """cell id -> (solved, how many checks), from one query over the reader's answers."""
    stmt = (
        select(
            ProfileAnswer.cell_id,
            ProfileAnswer.question,
            ProfileAnswer.correct,
            ProfileAnswer.questions,
            ProfileAnswer.created_at,
        )
        .where(ProfileAnswer.user == user)
        .order_by(ProfileAnswer.id)
    )
    latest: dict[str, dict[str, bool]] = {}
    total: dict[str, int] = {}
    checks: dict[str, set[object]] = {}
    with db.session() as s:
        for cell, question, correct, questions, at in s.execute(stmt):
            latest.setdefault(cell, {})[question] = bool(correct)
            total[cell] = int(questions)
            checks.setdefault(cell, set()).add(at)
    return {
        cell: (total[cell] > 0 and sum(right.values()) >= total[cell], len(checks[cell]))
        for cell, right in latest.items()
    }
