"""One simulated learner of bench/loadtest.py (a browser with its own cookie and address),
and the recorder of every request and run."""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

from bench.loadtest_figures import FINAL, RunRecord
from bench.loadtest_sources import Cell, Chapter, Sources, pick_source

POLL_S = 0.5  # the card's own hx-trigger
ASSET = re.compile(r'(?:href|src)="(/static/[^"]+)"')
RUN_ID = re.compile(r'data-run-id="([0-9a-f]{32})"')
STATE = re.compile(r'data-state="([a-z_]+)"')
FINAL_ATTR = re.compile(r'data-final="(true|false)"')
DETAIL = re.compile(r'<p class="run-detail">([^<]*)</p>')
AHEAD = re.compile(r"(\d+) runs? ahead in the queue")
WAIT = re.compile(r"about ([0-9.]+) (ns|µs|ms|s) to wait")
UNITS = {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
SERVER_TIMING = re.compile(r"dur=([0-9.]+)")


@dataclass
class Recorder:
    started: float = field(default_factory=time.perf_counter)
    requests: dict[str, list[tuple[float, float, float | None, int]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    errors: Counter[str] = field(default_factory=Counter)
    runs: list[RunRecord] = field(default_factory=list)
    rate_limited: int = 0

    def now(self) -> float:
        return time.perf_counter() - self.started

    def add(self, kind: str, t: float, ms: float, response: httpx.Response | None) -> None:
        server = None
        status = 0
        if response is not None:
            status = response.status_code
            timing = SERVER_TIMING.search(response.headers.get("server-timing", ""))
            server = float(timing.group(1)) if timing else None
        self.requests[kind].append((round(t, 3), round(ms, 2), server, status))


# ---------------------------------------------------------------- one learner


@dataclass
class Config:
    base: str
    duration_s: float
    drain_s: float
    arrival_s: float
    read_s: tuple[float, float]
    edit_s: tuple[float, float]
    source_addresses: bool
    seed: int
    follow: str = "stream"  # "stream": the run's event stream, as the page; "poll": the card


class Learner:
    def __init__(
        self, n: int, cfg: Config, book: list[Chapter], sources: Sources, rec: Recorder
    ) -> None:
        self.n = n
        self.cfg = cfg
        self.book = book
        self.sources = sources
        self.rec = rec
        self.rng = random.Random(cfg.seed * 100003 + n)
        self.etags: dict[str, str] = {}
        transport = httpx.AsyncHTTPTransport(
            local_address=self.address() if cfg.source_addresses else None, retries=0
        )
        self.client = httpx.AsyncClient(
            base_url=cfg.base,
            transport=transport,
            timeout=httpx.Timeout(60.0),
            headers={"User-Agent": f"kplay-loadtest learner {n}"},
        )

    def address(self) -> str:
        return f"127.1.{self.n // 250}.{self.n % 250 + 1}"

    # -------------------------------------------------------- plumbing

    def stopping(self) -> bool:
        return self.rec.now() >= self.cfg.duration_s

    async def think(self, bounds: tuple[float, float]) -> bool:
        """Sleep a while; False when the test's time is up meanwhile."""
        left = self.cfg.duration_s - self.rec.now()
        pause = self.rng.uniform(*bounds)
        await asyncio.sleep(max(0.0, min(pause, left)))
        return not self.stopping()

    async def request(self, kind: str, method: str, url: str, **kw: Any) -> httpx.Response | None:
        t = self.rec.now()
        start = time.perf_counter()
        try:
            response = await self.client.request(method, url, **kw)
        except httpx.HTTPError as exc:
            self.rec.add(kind, t, (time.perf_counter() - start) * 1000, None)
            self.rec.errors[f"{kind}: {type(exc).__name__}"] += 1
            return None
        self.rec.add(kind, t, (time.perf_counter() - start) * 1000, response)
        if response.status_code >= 500:
            self.rec.errors[f"{kind}: HTTP {response.status_code}"] += 1
        return response

    async def page(self, kind: str, url: str) -> str | None:
        response = await self.request(kind, "GET", url)
        if response is None or response.status_code != 200:
            return None
        for asset in dict.fromkeys(ASSET.findall(response.text)):
            etag = self.etags.get(asset)
            headers = {"If-None-Match": etag} if etag else {}
            got = await self.request(
                "static-304" if etag else "static", "GET", asset, headers=headers
            )
            if got is not None and got.status_code == 200 and got.headers.get("etag"):
                self.etags[asset] = got.headers["etag"]
        return response.text

    # -------------------------------------------------------- behaviour

    async def live(self) -> None:
        try:
            await asyncio.sleep(self.rng.uniform(0, self.cfg.arrival_s))
            await self.page("index", "/")
            chapter = 0
            while not self.stopping():
                await self.read_chapter(self.book[chapter])
                if self.rng.random() < 0.8:
                    chapter = (chapter + 1) % len(self.book)
                else:
                    chapter = self.rng.randrange(len(self.book))
        finally:
            await self.client.aclose()

    async def read_chapter(self, chapter: Chapter) -> None:
        await self.page("chapter", chapter.url)
        if not await self.think(self.cfg.read_s):
            return
        for cell in chapter.cells:
            for _attempt in range(3):
                if self.stopping():
                    return
                record = await self.run(cell)
                if record is not None and record.final_state == "done":
                    break
                if not await self.think(self.cfg.edit_s):
                    return
            if not await self.think(self.cfg.read_s):
                return

    async def run(self, cell: Cell) -> RunRecord | None:
        backend = self.rng.choice(cell.backends)
        try:
            kind, name, source = pick_source(self.rng, self.sources.kinds(cell.problem, backend))
        except LookupError:
            return None
        record = RunRecord(self.n, cell.id, cell.problem, backend, kind, name, self.rec.now())
        self.rec.runs.append(record)
        started = time.perf_counter()
        while True:
            form = {"backend": backend, "source": source}
            route = "runs"
            if cell.prediction is not None:
                form["prediction"] = cell.prediction
                route = "predicted-runs"
            response = await self.request(
                "submit",
                "POST",
                f"/cells/{cell.id}/{route}",
                data=form,
                headers={"HX-Request": "true"},
            )
            if response is not None and response.status_code == 429:
                # Over a rate limit or the per-reader cap: wait as told, as a person would.
                self.rec.rate_limited += 1
                wait = float(response.headers.get("retry-after", "5"))
                if self.rec.now() + wait >= self.cfg.duration_s:
                    record.submit_status = 429
                    return record
                await asyncio.sleep(wait)
                continue
            break
        if response is None:
            record.error = "submit failed"
            record.lost = True  # its fate is unknown
            return record
        record.submit_status = response.status_code
        found = RUN_ID.search(response.text)
        if response.status_code != 201 or found is None:
            record.final_state = "not-accepted"
            record.detail = re.sub(r"<[^>]+>", " ", response.text)[:200].strip()
            return record
        record.run_id = found.group(1)
        self.read_card(record, response.text)
        html = response.text
        deadline = self.cfg.duration_s + self.cfg.drain_s
        if self.cfg.follow == "stream":
            html = await self.follow_stream(record, html, deadline)
            if record.lost:
                return record
        while not card_final(html):
            if self.rec.now() >= deadline:
                break
            await asyncio.sleep(POLL_S)
            got = await self.request("card", "GET", f"/runs/{record.run_id}/card")
            record.polls += 1
            if got is None:
                continue  # the server may be busy or restarting: keep polling, as the page does
            if got.status_code == 404:
                record.lost = True
                record.error = "card 404"
                return record
            if got.status_code == 200:
                html = got.text
        state = STATE.search(html)
        record.final_state = state.group(1) if state else None
        if record.final_state not in FINAL:
            record.last_position = position(html)
            return record  # left non-final: counted at the end
        record.verdict_s = time.perf_counter() - started
        await self.request(
            "history", "GET", f"/cells/{cell.id}/history", headers={"HX-Request": "true"}
        )
        await self.measure(record)
        return record

    async def follow_stream(self, record: RunRecord, html: str, deadline: float) -> str:
        """The card as the page follows it: the run's event stream, reconnecting with
        Last-Event-ID when a stream ends before the final state (the server closes each
        after a minute). Returns the last card; the poll loop takes over if the time is up.
        The time to the stream's response headers is recorded as an "events" request."""
        last_id: str | None = None
        url = f"/api/v1/runs/{record.run_id}/events"
        while not card_final(html) and self.rec.now() < deadline:
            headers = {"Last-Event-ID": last_id} if last_id else {}
            t, start = self.rec.now(), time.perf_counter()
            try:
                async with self.client.stream("GET", url, headers=headers) as response:
                    self.rec.add("events", t, (time.perf_counter() - start) * 1000, response)
                    if response.status_code == 404:
                        record.lost = True
                        record.error = "events 404"
                        return html
                    if response.status_code == 200:
                        data: list[str] = []
                        async for line in response.aiter_lines():
                            if line.startswith("id:"):
                                last_id = line[3:].strip()
                            elif line.startswith("data:"):
                                data.append(line[5:].lstrip())
                            elif not line and data:
                                message = json.loads("\n".join(data))
                                data = []
                                record.events += 1
                                html = message.get("html") or html
                                if message.get("final"):
                                    return html
            except httpx.HTTPError as exc:
                self.rec.add("events", t, (time.perf_counter() - start) * 1000, None)
                self.rec.errors[f"events: {type(exc).__name__}"] += 1
            await asyncio.sleep(POLL_S)  # the browser's reconnect delay (retry: 500)
        return html

    def read_card(self, record: RunRecord, html: str) -> None:
        """What the card answered to the submit said: state, place in the queue, estimate."""
        state = STATE.search(html)
        record.state_at_submit = state.group(1) if state else None
        record.position_at_submit = position(html)
        detail = DETAIL.search(html)
        wait = WAIT.search(detail.group(1) if detail else "")
        if wait:
            record.estimate_s = float(wait.group(1)) * UNITS[wait.group(2)]

    async def measure(self, record: RunRecord) -> None:
        """The server's timestamps of a finished run (one JSON read; not a page the learner
        would load, so it is recorded apart)."""
        got = await self.request("api-run", "GET", f"/api/v1/runs/{record.run_id}")
        if got is None or got.status_code != 200:
            return
        body = got.json()
        record.detail = body.get("detail")
        if record.detail and record.detail.startswith("lost"):
            record.lost = True
        created, started, finished = (
            _ts(body.get(k)) for k in ("created_at", "started_at", "finished_at")
        )
        if created is not None and started is not None:
            record.queued_s_server = started - created
        if started is not None and finished is not None:
            record.run_s_server = finished - started


def position(html: str) -> int | None:
    """Runs ahead, as a queued card says it; 0 once a worker has taken the run."""
    detail = DETAIL.search(html)
    text = detail.group(1) if detail else ""
    ahead = AHEAD.search(text)
    if ahead:
        return int(ahead.group(1))
    return 0 if "A worker has taken the run" in text else None


def card_final(html: str) -> bool:
    found = FINAL_ATTR.search(html)
    return found is None or found.group(1) == "true"


def _ts(value: str | None) -> float | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
