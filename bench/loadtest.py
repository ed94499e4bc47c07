"""A class at once: N simulated learners reading chapters and running cells for a while,
against a real `kplay serve`.

    python bench/loadtest.py --mode embedded --learners 200 --duration 300
    python bench/loadtest.py --mode celery --learners 200 --duration 300
    python bench/loadtest.py --target http://127.0.0.1:8000 --learners 20 --duration 60

`--mode embedded` starts `kplay serve` in a subprocess on a free port with its own data
folder (SQLite database, session key); `--mode celery` also starts a private redis-server
(bench/celery_fleet.py) and one `kplay worker --cpu-only`, and points the server at them;
`--target` drives a server that is already running (nothing is started or counted in its
database).

Each learner is one browser: its own session cookie (it keeps what the server sets) and,
against a loopback server, its own client address (127.1.x.y), so the per-reader and the
per-address run-start limits count each learner apart, as they would count a class on
separate machines. A learner arrives within the first `--arrival` seconds, opens the table
of contents and the first chapter with every static asset the page names (later pages only
revalidate them, If-None-Match), reads, and runs each cell of the chapter as the page does:
a POST of the editor's source with HX-Request, then the card polled every 500 ms until it is
final, then the cell's history. Sources are real: the problem's starter, a correct or a wrong
solution from kernels/problems/<slug>/, or a correct one with a loop that never ends inserted
at the top of the kernel (it hits the time limit; CUDA C++ is only compiled here, so for it a
wrong solution stands in). A learner whose run was not correct tries again, at most three
times per cell, then moves to the next chapter (sometimes to another one).

After `--duration` seconds no learner starts anything new; runs in flight are followed to
their verdict for at most `--drain` seconds. Recorded: every request's latency (client side,
and the server's own time from Server-Timing), submit -> verdict latency, the wait estimate
the card showed at submit next to the real wait (started_at - created_at, read from the JSON
API once the run is final), and runs lost (accepted, then gone or ended as lost) or left
non-final. The JSON goes to --out; a Markdown summary is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.benchlib import commit  # noqa: E402

FINAL = {"done", "wrong", "compile_error", "runtime_error", "timeout", "rejected", "suspicious"}
POLL_S = 0.5  # the card's own hx-trigger
PYTHON_BACKENDS = {"numba-cpu", "numba-cuda", "triton"}
ASSET = re.compile(r'(?:href|src)="(/static/[^"]+)"')
RUN_ID = re.compile(r'data-run-id="([0-9a-f]{32})"')
STATE = re.compile(r'data-state="([a-z_]+)"')
FINAL_ATTR = re.compile(r'data-final="(true|false)"')
DETAIL = re.compile(r'<p class="run-detail">([^<]*)</p>')
AHEAD = re.compile(r"(\d+) runs? ahead in the queue")
WAIT = re.compile(r"about ([0-9.]+) (ns|µs|ms|s) to wait")
UNITS = {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
SERVER_TIMING = re.compile(r"dur=([0-9.]+)")


# ---------------------------------------------------------------- what learners run


@dataclass(frozen=True)
class Cell:
    id: str
    problem: str
    backends: tuple[str, ...]


@dataclass(frozen=True)
class Chapter:
    url: str
    cells: tuple[Cell, ...]


def load_book() -> list[Chapter]:
    """The installed book's chapters and cells, in reading order."""
    from kplay.app.book import Book
    from kplay.config import Settings
    from kplay.kernels.catalog import load_catalog

    settings = Settings()
    book = Book(settings.book_dir, load_catalog(), settings.results_dir)
    return [
        Chapter(ch.url, tuple(Cell(c.id, c.problem, tuple(c.backends)) for c in ch.cells))
        for ch in book.chapters()
    ]


def loop_forever(source: str) -> str | None:
    """`source` with `while True: pass` as the first statement of its first jitted function."""
    lines = source.splitlines()
    for i, line in enumerate(lines):
        if not (line.lstrip().startswith("@") and "jit" in line):
            continue
        j = i + 1
        while j < len(lines) and not lines[j].lstrip().startswith("def "):
            j += 1
        while j < len(lines) and not lines[j].split("#")[0].rstrip().endswith(":"):
            j += 1
        body = next((k for k in range(j + 1, len(lines)) if lines[k].split("#")[0].strip()), None)
        if body is None:
            return None
        indent = lines[body][: len(lines[body]) - len(lines[body].lstrip())]
        loop = [f"{indent}while True:", f"{indent}    pass"]
        return "\n".join(lines[:body] + loop + lines[body:]) + "\n"
    return None


class Sources:
    """Per (problem, backend): the starter, correct and wrong solutions, and looping ones."""

    def __init__(self) -> None:
        from kplay.kernels.catalog import get_problem

        self._get = get_problem
        self._cache: dict[tuple[str, str], dict[str, list[tuple[str, str]]]] = {}

    def kinds(self, problem: str, backend: str) -> dict[str, list[tuple[str, str]]]:
        key = (problem, backend)
        if key not in self._cache:
            spec = self._get(problem)
            out: dict[str, list[tuple[str, str]]] = defaultdict(list)
            for kind in ("correct", "wrong"):
                for b, path in spec.solutions(kind):
                    if b == backend:
                        out[kind].append((f"{kind}/{path.name}", path.read_text()))
            with contextlib.suppress(Exception):  # not every backend has a starter
                path = spec.starter_path(backend)
                out["starter"].append((f"starter/{path.name}", path.read_text()))
            if backend in PYTHON_BACKENDS:
                for name, text in out["correct"]:
                    looped = loop_forever(text)
                    if looped is not None:
                        out["loop"].append((f"loop/{name.split('/', 1)[1]}", looped))
            self._cache[key] = dict(out)
        return self._cache[key]


# The share of each kind of source among a learner's runs.
MIX = {"correct": 0.45, "wrong": 0.25, "starter": 0.20, "loop": 0.10}


def pick_source(
    rng: random.Random, kinds: dict[str, list[tuple[str, str]]]
) -> tuple[str, str, str]:
    """(kind, name, source) drawn by MIX among the kinds there are; a looping source stands
    in as a wrong one where the backend cannot loop (CUDA C++ is only compiled)."""
    wanted = rng.choices(list(MIX), weights=list(MIX.values()))[0]
    for kind in (wanted, "wrong", "correct", "starter"):
        if kinds.get(kind):
            name, source = rng.choice(kinds[kind])
            return kind, name, source
    raise LookupError("no source")


# ---------------------------------------------------------------- records


@dataclass
class RunRecord:
    learner: int
    cell: str
    problem: str
    backend: str
    kind: str
    source_name: str
    submit_at: float  # seconds since the start of the test
    submit_status: int = 0
    run_id: str | None = None
    position_at_submit: int | None = None
    estimate_s: float | None = None
    state_at_submit: str | None = None
    final_state: str | None = None
    verdict_s: float | None = None  # submit -> final card, as the learner saw it
    queued_s_server: float | None = None  # started_at - created_at
    run_s_server: float | None = None  # finished_at - started_at
    detail: str | None = None
    polls: int = 0
    last_position: int | None = None  # what the last card said, for a run left non-final
    lost: bool = False
    error: str | None = None


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
            response = await self.request(
                "submit",
                "POST",
                f"/cells/{cell.id}/runs",
                data={"backend": backend, "source": source},
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


# ---------------------------------------------------------------- servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Deployment:
    """`kplay serve` (and for celery a private Redis and one CPU worker) in subprocesses."""

    def __init__(self, mode: str, workdir: Path, server_env: dict[str, str]) -> None:
        self.mode = mode
        self.dir = workdir
        self.port = free_port()
        self.db = self.dir / "kplay.sqlite3"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.redis: Any = None
        self.env = {
            **os.environ,
            "KPLAY_HOST": "127.0.0.1",
            "KPLAY_PORT": str(self.port),
            "KPLAY_DATABASE_URL": f"sqlite:///{self.db}",
            "KPLAY_SECRET_KEY": secrets.token_urlsafe(48),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            **server_env,
        }

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kplay(self, *args: str, log: str) -> subprocess.Popen[bytes]:
        with open(self.dir / log, "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kplay.cli", *args],
                env=self.env,
                cwd=ROOT,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    def start(self) -> None:
        if self.mode == "celery":
            from bench.celery_fleet import Redis

            self.redis = Redis()
            self.redis.start()
            self.env.update(
                KPLAY_BROKER_URL=self.redis.url,
                KPLAY_KEY_PREFIX=f"kplayload-{secrets.token_hex(4)}",
                KPLAY_RESULT_KEY=secrets.token_hex(32),
            )
            self.kplay("worker", "--cpu-only", log="worker.log")
        self.kplay("serve", log="serve.log")
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    break
            time.sleep(0.2)
        else:
            sys.exit(f"kplay serve did not answer; see {self.dir / 'serve.log'}")
        if self.mode == "celery":
            while time.monotonic() < deadline:
                if httpx.get(f"{self.url}/api/v1/devices", timeout=5).json():
                    return
                time.sleep(0.5)
            sys.exit(f"no worker registered; see {self.dir / 'worker.log'}")

    def states(self) -> dict[str, int]:
        """Every run in the server's database, by state."""
        import sqlite3

        with contextlib.closing(sqlite3.connect(self.db)) as con:
            return dict(con.execute("SELECT state, count(*) FROM runs GROUP BY state").fetchall())

    def stop(self) -> None:
        for proc in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if self.redis is not None:
            self.redis.stop()


# ---------------------------------------------------------------- the test


async def drive(cfg: Config, learners: int, rec: Recorder, load: list[float]) -> None:
    book = [c for c in load_book() if c.cells]
    sources = Sources()
    crowd = [Learner(i, cfg, book, sources, rec) for i in range(learners)]

    async def sample_load() -> None:
        while True:
            load.append(os.getloadavg()[0])
            await asyncio.sleep(10)

    sampler = asyncio.create_task(sample_load())
    try:
        await asyncio.gather(*(learner.live() for learner in crowd))
    finally:
        sampler.cancel()
        load.append(os.getloadavg()[0])


def run_test(args: argparse.Namespace) -> dict[str, Any]:
    deployment: Deployment | None = None
    work = None
    if args.target:
        base = args.target.rstrip("/")
    else:
        work = Path(tempfile.mkdtemp(prefix="kplay-load-"))
        server_env = dict(kv.split("=", 1) for kv in args.server_env)
        deployment = Deployment(args.mode, work, server_env)
        deployment.start()
        base = deployment.url
    host = urlsplit(base).hostname or ""
    loopback = _loopback(host)
    cfg = Config(
        base=base,
        duration_s=args.duration,
        drain_s=args.drain,
        arrival_s=min(args.arrival, args.duration),
        read_s=(args.read_min, args.read_max),
        edit_s=(args.edit_min, args.edit_max),
        source_addresses=loopback and not args.one_address,
        seed=args.seed,
    )
    rec = Recorder()
    load: list[float] = [os.getloadavg()[0]]
    try:
        asyncio.run(drive(cfg, args.learners, rec, load))
        states = deployment.states() if deployment is not None else None
    finally:
        if deployment is not None:
            deployment.stop()
            if args.keep:
                print(f"the server's data folder and logs: {work}", file=sys.stderr)
            else:
                shutil.rmtree(deployment.dir, ignore_errors=True)
    return summarise(args, cfg, rec, load, states)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


# ---------------------------------------------------------------- figures


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def spread(values: list[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "p50": pct(values, 0.5),
        "p95": pct(values, 0.95),
        "max": max(values) if values else None,
    }


def estimate_accuracy(runs: list[RunRecord], tolerance: float = 0.3) -> dict[str, Any]:
    """Runs that waited behind others at submit: how often the card's estimate was within
    `tolerance` of the real wait. A queued run whose card showed no estimate is a miss."""
    queued = [
        r
        for r in runs
        if r.position_at_submit and r.queued_s_server is not None and r.final_state in FINAL
    ]
    shown = [r for r in queued if r.estimate_s is not None]
    errors = [abs(r.estimate_s - r.queued_s_server) / max(r.queued_s_server, 1e-9) for r in shown]  # type: ignore[operator]
    within = sum(1 for e in errors if e <= tolerance)
    return {
        "queued_runs": len(queued),
        "with_estimate": len(shown),
        "within_30pct": within,
        "share_within_30pct": within / len(queued) if queued else None,
        "median_abs_rel_error": statistics.median(errors) if errors else None,
        "p80_abs_rel_error": pct(errors, 0.8),
        "median_signed_rel_error": statistics.median(
            (r.estimate_s - r.queued_s_server) / max(r.queued_s_server, 1e-9)  # type: ignore[operator]
            for r in shown
        )
        if shown
        else None,
    }


def run_figures(runs: list[RunRecord], states: dict[str, int] | None) -> dict[str, Any]:
    """Everything said about the runs, from their records (and the server's database)."""
    accepted = [r for r in runs if r.run_id]
    # Runs a worker evaluated (a refused one is ended at once, without waiting its turn).
    evaluated = [r for r in accepted if r.final_state in FINAL - {"rejected"}]
    verdicts: dict[str, list[float]] = defaultdict(list)
    for r in accepted:
        if r.verdict_s is not None:
            verdicts[f"{r.backend} / {r.final_state}"].append(r.verdict_s)
    runs_s: dict[str, list[float]] = defaultdict(list)
    for r in evaluated:
        if r.run_s_server is not None:
            runs_s[f"{r.backend} / {r.kind}"].append(r.run_s_server)
    queued = [r for r in evaluated if r.position_at_submit]
    lost = [r for r in runs if r.lost]
    non_final = [r for r in accepted if not r.lost and r.final_state not in FINAL]
    db_non_final = (
        sum(n for s, n in states.items() if s not in FINAL) if states is not None else None
    )
    return {
        "runs": {
            "attempted": len(runs),
            "accepted": len(accepted),
            "evaluated": len(evaluated),
            "by_final_state": dict(Counter(str(r.final_state) for r in runs)),
            "by_backend_kind": dict(Counter(f"{r.backend} / {r.kind}" for r in accepted)),
            "lost": len(lost),
            "non_final": len(non_final),
            # Of those, still waiting their turn by their last card (not lost: in the queue).
            "non_final_in_queue": sum(1 for r in non_final if r.last_position),
            "db_states": states,
            "db_non_final": db_non_final,
        },
        "verdict_s": {k: spread(v) for k, v in sorted(verdicts.items())},
        "queue_wait_s": {
            "evaluated": spread(_waits(evaluated)),
            "queued_at_submit": spread(_waits(queued)),
        },
        "queued_at_submit": len(queued),
        "run_s_server": {k: spread(v) for k, v in sorted(runs_s.items())},
        "estimate": estimate_accuracy(evaluated),
    }


def _waits(runs: list[RunRecord]) -> list[float]:
    return [r.queued_s_server for r in runs if r.queued_s_server is not None]


def summarise(
    args: argparse.Namespace,
    cfg: Config,
    rec: Recorder,
    load: list[float],
    states: dict[str, int] | None,
) -> dict[str, Any]:
    pages: dict[str, Any] = {}
    for kind, rows in sorted(rec.requests.items()):
        ok = [r for r in rows if r[3] and r[3] < 500]
        pages[kind] = {
            "requests": len(rows),
            "failed": len(rows) - len(ok),
            "client_ms": spread([r[1] for r in ok]),
            "server_ms": spread([r[2] for r in ok if r[2] is not None]),
            "status": dict(Counter(str(r[3]) for r in rows)),
        }
    return {
        "date": datetime.now().astimezone().isoformat(timespec="seconds"),
        "commit": commit(),
        "mode": "target" if args.target else args.mode,
        "target": cfg.base if args.target else None,
        "argv": sys.argv[1:],
        "learners": args.learners,
        "duration_s": cfg.duration_s,
        "drain_s": cfg.drain_s,
        "elapsed_s": round(rec.now(), 1),
        "source_addresses": cfg.source_addresses,
        "server_env": args.server_env,
        "cpus": os.cpu_count(),
        "loadavg_1min": {
            "samples": [round(x, 2) for x in load],
            "mean": round(statistics.fmean(load), 2),
            "max": round(max(load), 2),
        },
        "requests": pages,
        "request_errors": dict(rec.errors),
        "rate_limited_429": rec.rate_limited,
        **run_figures(rec.runs, states),
        "run_records": [asdict(r) for r in rec.runs],
        # (seconds since the start, client ms, server ms, status) of every request: large.
        "request_samples": dict(rec.requests) if args.raw_requests else None,
    }


def _f(value: float | None, scale: float = 1.0, digits: int = 0) -> str:
    return "—" if value is None else f"{value * scale:.{digits}f}"


def markdown(out: dict[str, Any]) -> str:
    lines = [
        f"mode {out['mode']}, {out['learners']} learners, {out['duration_s']:g} s "
        f"(+ drain up to {out['drain_s']:g} s; took {out['elapsed_s']:g} s), commit "
        f"{out['commit']}, load average (1 min) mean {out['loadavg_1min']['mean']}, max "
        f"{out['loadavg_1min']['max']} on {out['cpus']} CPUs",
        "",
        "| request | n | failed | p50 ms | p95 ms | max ms | server p50 ms | server p95 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind, row in out["requests"].items():
        c, s = row["client_ms"], row["server_ms"]
        lines.append(
            f"| {kind} | {row['requests']} | {row['failed']} | {_f(c['p50'], digits=1)} | "
            f"{_f(c['p95'], digits=1)} | {_f(c['max'], digits=0)} | {_f(s['p50'], digits=1)} | "
            f"{_f(s['p95'], digits=1)} |"
        )
    lines += ["", "| backend / verdict | runs | p50 s | p95 s | max s |", "|---|---|---|---|---|"]
    for key, row in out["verdict_s"].items():
        lines.append(
            f"| {key} | {row['n']} | {_f(row['p50'], digits=1)} | {_f(row['p95'], digits=1)} | "
            f"{_f(row['max'], digits=1)} |"
        )
    e, r = out["estimate"], out["runs"]
    lines += [""]
    for label, w in out["queue_wait_s"].items():
        lines.append(
            f"queue wait (started_at - created_at), runs {label.replace('_', ' ')}: n {w['n']}, "
            f"p50 {_f(w['p50'], digits=1)} s, p95 {_f(w['p95'], digits=1)} s, "
            f"max {_f(w['max'], digits=1)} s"
        )
    lines += [
        f"wait estimate: {e['queued_runs']} queued runs, {e['with_estimate']} showed one, "
        f"{e['within_30pct']} within 30% ({_f(e['share_within_30pct'], 100)}%); median |error| "
        f"{_f(e['median_abs_rel_error'], 100)}%, 80th percentile "
        f"{_f(e['p80_abs_rel_error'], 100)}%, median signed "
        f"{_f(e['median_signed_rel_error'], 100)}%",
        f"runs: {r['attempted']} attempted, {r['accepted']} accepted, {r['evaluated']} "
        f"evaluated, lost {r['lost']}, "
        f"non-final {r['non_final']} ({r.get('non_final_in_queue', '—')} of them still in the "
        f"queue by their last card; database: {r['db_non_final']}); by state "
        f"{r['by_final_state']}; database {r['db_states']}",
        f"429 answers {out['rate_limited_429']}; request errors {out['request_errors'] or 'none'}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["embedded", "celery"], default="embedded")
    parser.add_argument("--target", help="URL of a running server (nothing is started)")
    parser.add_argument("--learners", type=int, default=200)
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of activity")
    parser.add_argument(
        "--drain", type=float, default=600.0, help="seconds to follow runs after the end"
    )
    parser.add_argument("--arrival", type=float, default=30.0, help="learners arrive over")
    parser.add_argument("--read-min", type=float, default=10.0)
    parser.add_argument("--read-max", type=float, default=40.0)
    parser.add_argument("--edit-min", type=float, default=5.0)
    parser.add_argument("--edit-max", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--one-address",
        action="store_true",
        help="every learner from 127.0.0.1 (the per-address limit then counts them together)",
    )
    parser.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="KPLAY_X=V",
        help="a setting for the started server (and worker); repeatable",
    )
    parser.add_argument("--out", type=Path, help="write the JSON here")
    parser.add_argument(
        "--raw-requests", action="store_true", help="keep every request's timing in the JSON"
    )
    parser.add_argument("--keep", action="store_true", help="keep the server's data folder")
    parser.add_argument(
        "--summary-of", type=Path, metavar="JSON", help="only recount the runs of a saved result"
    )
    args = parser.parse_args(argv)
    if args.summary_of:
        out = json.loads(args.summary_of.read_text())
        runs = [RunRecord(**r) for r in out["run_records"]]
        out.update(run_figures(runs, out["runs"]["db_states"]))
        if args.out:
            args.out.write_text(json.dumps(out, indent=1))
        print(markdown(out))
        return 0
    out = run_test(args)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1))
    print(markdown(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
