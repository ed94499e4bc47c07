"""A run's card as it changes, pushed as server-sent events (text/event-stream).

GET /api/v1/runs/{id}/events answers like GET /api/v1/runs/{id}: only the reader who
started the run may follow it; anyone else gets 404, as for a run that does not exist.

Every message is event `card`, its data a JSON object: the run's id, its state, whether that
state is final, `at` (when the server learned of the change, Unix seconds; absent on a
message made from the database alone), `sent` (when the message left) and `html`, the card
as GET /runs/{id}/card would render it at that state. The stream begins with the run's
state now (from the database), or, when the browser reconnects with Last-Event-ID, with
the changes it missed; it ends after the final state. Without news for a second the
database is read again, so a change this process did not see (another web process took it
off the result stream) still arrives, and a run its worker lost is ended as the poll would
end it. A stream lasts at most a minute; the browser then reconnects on its own.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from kplay.app.db.models import Run
from kplay.app.deps import RunsDep, Services, ServicesDep, UserDep
from kplay.app.services import views
from kplay.app.services.cards import RunCard, build_card, steps_for
from kplay.app.services.live import LiveEvent, ProgressHub
from kplay.app.services.livecard import live_card
from kplay.app.services.runs import RunNotFound, RunService

router = APIRouter(prefix="/api/v1", tags=["api"])

RECHECK_S = 1.0  # without an event for this long, the database is read again
KEEPALIVE_S = 15.0  # a comment line this often keeps proxies from closing a quiet stream
STREAM_MAX_S = 60.0  # then the stream ends and the browser reconnects with Last-Event-ID
RETRY_MS = 500  # how long the browser waits before it reconnects
NEWS_WAIT_S = 0.2  # how long a change found in the database waits for its own event


@router.get(
    "/runs/{run_id}/events",
    summary="A run's progress as server-sent events",
    description="Readable by the session that started the run only; any other gets 404. "
    "Event `card` carries JSON: id, state, final, at, sent and html (the run card). "
    "Send Last-Event-ID to resume; the stream ends after the final state.",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}, 404: {"description": "no such run"}},
)
async def run_events(
    run_id: str, request: Request, services: ServicesDep, runs: RunsDep, user: UserDep
) -> StreamingResponse:
    try:
        run = await run_in_threadpool(runs.visible, run_id, user)
    except RunNotFound:
        raise HTTPException(status_code=404, detail=f"no run {run_id!r}") from None
    hub = services.live
    resume = hub.parse_id(request.headers.get("last-event-id"))
    stream = CardStream(services, runs, hub, run, user, resume)
    return StreamingResponse(
        stream.messages(),
        media_type="text/event-stream",
        # No buffering on the way: a proxy that holds the stream back holds the progress.
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def _message(event_id: str | None, data: dict[str, Any]) -> str:
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}event: card\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


class CardStream:
    """One reader following one run."""

    def __init__(
        self,
        services: Services,
        runs: RunService,
        hub: ProgressHub,
        run: Run,
        user: str,
        resume: int | None,
    ) -> None:
        self.services = services
        self.runs = runs
        self.hub = hub
        self.run = run
        self.user = user
        self.resume = resume
        self.template = services.templates.env.get_template("fragments/run_card.html")
        self.shown: tuple[str, str | None] | None = None  # (state, detail) last sent

    async def messages(self) -> AsyncIterator[str]:
        sub, seq = self.hub.subscribe(self.run.id)
        try:
            yield f"retry: {RETRY_MS}\n\n"
            missed = None if self.resume is None else self.hub.since(self.run.id, self.resume)
            if missed is None:
                text, final = await self._snapshot(seq)
                yield text
                if final:
                    return
            else:
                latest = self.hub.latest(self.run.id)
                if latest is not None:
                    self.shown = (latest.state, latest.detail)  # what the reader has, or will
                for event in (e for e in missed if e.seq <= seq):
                    yield await self._event(event)
                    if event.final:
                        return
            async for text in self._follow(sub, seq):
                yield text
        finally:
            sub.close()

    async def _follow(self, sub: Any, seq: int) -> AsyncIterator[str]:
        started = last_write = time.monotonic()
        while not self.hub.closed:
            event = await sub.next(RECHECK_S)
            if event is None and not self.hub.closed and await self._database_moved():
                # Most often the sink has stored a change and is about to publish it: wait a
                # moment for the event itself, which says when the change happened.
                event = await sub.next(NEWS_WAIT_S)
                if event is None:
                    text, final = await self._snapshot(seq)
                    yield text
                    last_write = time.monotonic()
                    if final:
                        return
                    continue
            if self.hub.closed:
                return
            if event is not None:
                if event.seq <= seq:
                    continue
                seq = event.seq
                yield await self._event(event)
                last_write = time.monotonic()
                if event.final:
                    return
                continue
            now = time.monotonic()
            if now - started > STREAM_MAX_S:
                return
            if now - last_write > KEEPALIVE_S:
                yield ": still here\n\n"
                last_write = now

    async def _database_moved(self) -> bool:
        """Whether the database knows of a change this stream has not sent (one another web
        process took off the result stream, or a run nobody works on any more, which the
        read ends as the poll would)."""
        run, _ = await run_in_threadpool(self.runs.watch, self.run.id, self.user)
        return (run.state, run.detail) != self.shown

    async def _snapshot(self, seq: int) -> tuple[str, bool]:
        card = await run_in_threadpool(views.run_card, self.runs, self.run.id, self.user)
        self.shown = (card.state, card.detail)
        data = self._data(card, at=None)
        return _message(self.hub.event_id(seq), data), card.final

    async def _event(self, event: LiveEvent) -> str:
        if event.final:
            # The sink stored the verdict before publishing it: the full card is there.
            card = await run_in_threadpool(views.run_card, self.runs, self.run.id, self.user)
        else:
            card = await run_in_threadpool(self._live_card, event)
        self.shown = (event.state, event.detail)
        return _message(self.hub.event_id(event.seq), self._data(card, at=event.at))

    def _live_card(self, event: LiveEvent) -> RunCard:
        """The in-flight card at the event's state, without reading the run again."""
        position = self.runs.queue_position(self.run) if event.state == "queued" else None
        card = dataclasses.replace(
            build_card(self.run, position),
            state=event.state,
            detail=event.detail,
            steps=steps_for(event.state, None),
        )
        return live_card(card, self.runs.timing_cap_s, time.time() - event.at)

    def _data(self, card: RunCard, at: float | None) -> dict[str, Any]:
        data: dict[str, Any] = {"id": card.run_id, "state": card.state, "final": card.final}
        if at is not None:
            data["at"] = at
        data["html"] = self.template.render(card=card)
        data["sent"] = time.time()
        return data
