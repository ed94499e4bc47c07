"""Shared runs: a run's owner mints a permanent, unguessable link to it, and anyone holding the
link reads the run (source, launch, verdict, numbers, roofline point) without being its owner.

The link's token is stored with the run (`runs.share_token`, migration 0003) and is the only
thing that opens it: 192 random bits, so links cannot be guessed or enumerated. Reading a run
by its id stays its owner's alone (app.services.access); a shared run is read by its token
only, and never shows who made it or their other attempts.

A reader who opens a shared run made in a kernel cell can fork it: the cell's page opens with
`?fork=<token>`, and its script loads the shared source and launch into that reader's own
editor. Running it there is an ordinary run, owned by the reader who pressed Run.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup
from sqlalchemy import select, update

from kplay.app.book import Book
from kplay.app.bookmd import highlight_code
from kplay.app.db.models import Run
from kplay.app.services import history as hist
from kplay.app.services.cards import RunCard, build_card, parse_result
from kplay.app.services.problems import backend_title, editor_language
from kplay.app.services.records import is_final
from kplay.app.services.runs import RunNotFound, RunService

TOKEN_BYTES = 24
# What secrets.token_urlsafe(TOKEN_BYTES) makes: 32 characters of the URL-safe alphabet.
TOKEN = re.compile(r"[A-Za-z0-9_-]{32}")
NO_SUCH_LINK = (
    "There is no shared run at this link. Check that the whole link was copied; "
    "a link stays valid as long as its run is kept."
)


class ShareError(Exception):
    """A share or a shared read refused; `status` is the HTTP status that fits it."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def shared_path(token: str) -> str:
    return f"/shared/{token}"


def share(runs: RunService, run_id: str, viewer: str) -> str:
    """The run's share token, minted on its first share; only its owner may share it."""
    try:
        run = runs.visible(run_id, viewer)
        if run.user != viewer:  # an admin reads every run, but only the owner shares one
            raise RunNotFound(run_id)
    except RunNotFound:
        # Another reader's run is refused like a missing one, so ids cannot be probed.
        raise ShareError(
            404, f"no run {run_id!r} of yours: only the reader who started a run can share it"
        ) from None
    if not is_final(run.state):
        raise ShareError(409, "the run has not finished yet: share it once its verdict is in")
    if run.share_token:
        return run.share_token
    token = secrets.token_urlsafe(TOKEN_BYTES)
    with runs.db.session() as s:
        # Two shares at once: the first token written stays, and both answer with it.
        s.execute(
            update(Run).where(Run.id == run.id, Run.share_token.is_(None)).values(share_token=token)
        )
        stored = s.scalar(select(Run.share_token).where(Run.id == run.id))
    assert stored is not None
    return stored


def open_shared(runs: RunService, token: str) -> Run:
    """The run a share token names, for anyone; ShareError(404) for any other token."""
    if not TOKEN.fullmatch(token):
        raise ShareError(404, NO_SUCH_LINK)  # not a token this service makes: not looked up
    with runs.db.session() as s:
        run = s.scalar(select(Run).where(Run.share_token == token))
    if run is None:
        raise ShareError(404, NO_SUCH_LINK)
    return run


def fork_url(book: Book, run: Run, token: str) -> tuple[str | None, str]:
    """Where the run can be forked (its cell's page, told which shared run to load), and a
    sentence for the reader: what Fork does, or why this run cannot be forked."""
    if run.cell_id is None:
        return None, (
            "This run was sent through the API, not from a kernel cell, so there is no cell "
            "to fork it into: copy its source to run it yourself."
        )
    try:
        cell = book.cell(run.cell_id)
    except KeyError:
        return None, (
            f"The kernel cell this run was made in ({run.cell_id}) is no longer in the book: "
            "copy its source to run it yourself."
        )
    if run.backend not in cell.backends:
        return None, f"The cell no longer offers {backend_title(run.backend)}: copy the source."
    try:
        page = book.chapter(cell.chapter).url if cell.chapter else f"/problems/{cell.problem}"
    except KeyError:
        return None, "The chapter of this run's cell is gone: copy its source to run it yourself."
    return f"{page}?fork={token}#cell-{cell.id}", (
        "Fork loads this source and launch into your own editor in the run's kernel cell; "
        "your run there is yours, with its own card and history."
    )


@dataclass(frozen=True)
class SharedPage:
    title: str
    token: str
    problem: str
    problem_title: str
    backend_title: str
    chapter_title: str | None
    chapter_url: str | None
    source_html: Markup
    language: str
    launch: list[tuple[str, str]]
    card: RunCard
    fork_url: str | None
    fork_note: str


def _chapter(book: Book, run: Run) -> tuple[str | None, str | None]:
    if not run.chapter:
        return None, None
    try:
        chapter = book.chapter(run.chapter)
    except KeyError:
        return None, None
    return chapter.label, chapter.url


def shared_card(run: Run) -> RunCard:
    """The run's card as any reader sees it: its own numbers and its point alone."""
    card = build_card(run)
    card.chart = hist.single_chart(run, "the shared run")
    return card


def shared_page(runs: RunService, token: str) -> SharedPage:
    run = open_shared(runs, token)
    problem = runs.catalog.get(run.problem)
    language = "cuda" if editor_language(run.backend) == "cpp" else "python"
    chapter_title, chapter_url = _chapter(runs.book, run)
    fork, note = fork_url(runs.book, run, token)
    fields = hist.launch_fields(run.launch)
    return SharedPage(
        title=f"Shared run · {problem.title if problem else run.problem}",
        token=token,
        problem=run.problem,
        problem_title=problem.title if problem else run.problem,
        backend_title=backend_title(run.backend),
        chapter_title=chapter_title,
        chapter_url=chapter_url,
        source_html=Markup(highlight_code(run.source, language)),  # Pygments escapes the text
        language=language,
        launch=[(name.replace("_", " "), value) for name, value in fields.items()],
        card=shared_card(run),
        fork_url=fork,
        fork_note=note,
    )


def shared_json(runs: RunService, token: str) -> dict[str, Any]:
    """What /api/v1/shared/{token} answers (app.routers.shared.SharedRunOut)."""
    run = open_shared(runs, token)
    result = parse_result(run)
    verdict, _tone = hist.verdict_of(run, result)
    timing = result.timing if result else None
    roof = result.roofline if result else None
    problem = runs.catalog.get(run.problem)
    fork, _note = fork_url(runs.book, run, token)
    return {
        "token": token,
        "url": shared_path(token),
        "problem": run.problem,
        "problem_title": problem.title if problem else run.problem,
        "backend": run.backend,
        "cell": run.cell_id,
        "chapter": run.chapter,
        "fork_url": fork,
        "created_at": run.created_at,
        "finished_at": run.finished_at,
        "state": run.state,
        "verdict": verdict,
        "source": run.source,
        "launch": run.launch,
        "launch_fields": hist.launch_fields(run.launch),
        "median_us": timing.median_us if timing and timing.timed else None,
        "percent_of_roofline": roof.percent_of_roofline if roof else None,
        "result": run.result,
    }
