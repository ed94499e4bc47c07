"""Builds the page contexts from the book, the catalog and the runs."""

from __future__ import annotations

import logging
from typing import Any

from kplay.app.book import Book, CellSpec
from kplay.app.contexts import CellView, ChapterPage, HistoryView, TocPage
from kplay.app.db.models import Run
from kplay.app.services import history as hist
from kplay.app.services.cards import RunCard, build_card
from kplay.app.services.elsewhere import check_elsewhere
from kplay.app.services.exercisekinds import ExerciseService, exercise_offers
from kplay.app.services.gpu_picker import device_choices
from kplay.app.services.livecard import live_card
from kplay.app.services.records import age_s, is_final
from kplay.app.services.runs import RunService

log = logging.getLogger(__name__)

BOOK_TITLE = "Writing Kernels with AI"


def toc_page(book: Book) -> TocPage:
    return TocPage(title=BOOK_TITLE, parts=book.parts())


def _window(svc: RunService) -> int:
    # The chart and the speedup look further back than the list under the cell shows.
    return max(svc.settings.history_limit, 50)


def _card(svc: RunService, run: Run, position: int | None, runs: list[Run], total: int) -> RunCard:
    """`runs`: the cell's runs, newest first, for the chart's older points and the speedup."""
    if not is_final(run.state):
        card = build_card(run, position)
        if run.state == "queued" and position:
            card.wait_s = svc.wait_estimate_s(run)
        # The row was last updated when the run reached its state (or its latest detail).
        return live_card(card, svc.timing_cap_s, age_s(run.updated_at))
    previous = hist.previous_timed(run, runs)
    card = build_card(run, position, previous, problem=svc.catalog.get(run.problem))
    card.chart = hist.chart(run, runs, total)
    if card.can_profile:
        latest = svc.profiles_of(run.id, run.user)[:1]
        if latest:
            profiled, where = svc.watch(latest[0].id, run.user)
            card.profile_card = build_card(profiled, where)
    if run.state == "compiled" and run.problem in svc.catalog:
        backends = svc.catalog[run.problem].backends
        card.elsewhere = check_elsewhere(run.backend, backends, _devices(svc))
    return card


def _devices(svc: RunService) -> list[dict[str, Any]]:
    try:
        return svc.executor.devices()
    except Exception:  # noqa: BLE001 - an offer is a nicety; the broker may be away
        log.exception("could not list the devices")
        return []


def run_card(svc: RunService, run_id: str, viewer: str) -> RunCard:
    """The card of one run, in whatever state it is; RunNotFound unless `viewer` may see it."""
    run, position = svc.watch(run_id, viewer)
    if not is_final(run.state) or run.cell_id is None:
        return _card(svc, run, position, [run], 1)
    runs = svc.history(run.cell_id, run.user, limit=_window(svc))
    return _card(svc, run, position, runs, svc.count(run.cell_id, run.user))


def history_view(svc: RunService, cell_id: str, user: str) -> HistoryView:
    # One more than shown, so the oldest attempt shown still has one to be diffed against.
    runs = svc.history(cell_id, user, limit=svc.settings.history_limit + 1)
    return _history(svc, cell_id, runs, svc.count(cell_id, user))


def _history(svc: RunService, cell_id: str, runs: list[Run], total: int) -> HistoryView:
    limit = svc.settings.history_limit
    attempts = hist.attempts(runs[: limit + 1], total)[:limit]
    return HistoryView(cell=cell_id, attempts=attempts, total=total)


def cell_view(
    svc: RunService,
    spec: CellSpec,
    user: str,
    devices: list[tuple[str, str]] | None = None,
) -> CellView:
    """One cell with its latest card and attempts, from one history query."""
    problem = svc.catalog[spec.problem]
    runs = svc.history(spec.id, user, limit=_window(svc))
    total = svc.count(spec.id, user) if runs else 0
    card = None
    if runs:
        latest, position = svc.watch(runs[0].id, user)  # may end a run nobody works on
        runs[0] = latest
        card = _card(svc, latest, position, runs, total)
    return CellView(
        spec=spec,
        problem_title=problem.title,
        problem_summary=problem.summary,
        offers=exercise_offers(problem, spec),  # a fix cell starts from its wrong kernel
        card=card,
        history=_history(svc, spec.id, runs, total),
        hints=list(problem.hints),
        devices=list(devices or []),
        exercise_state=ExerciseService(svc).state(spec, user) if spec.exercise else None,
    )


def chapter_page(book: Book, svc: RunService, slug: str, user: str) -> ChapterPage:
    chapter = book.chapter(slug)
    before, after = book.neighbours(slug)
    devices = device_choices(svc.executor)
    segments = [
        seg if isinstance(seg, str) else cell_view(svc, seg, user, devices)
        for seg in chapter.segments
    ]
    return ChapterPage(
        title=chapter.title, chapter=chapter, previous=before, next=after, segments=segments
    )
