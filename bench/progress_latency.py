"""How long a run's state change takes to reach a watching page: the event stream against
the card's 500 ms poll (and a tighter 100 ms one).

The app runs in this process under uvicorn on a free port, with the embedded executor
(`kplay serve`'s default: a warm child-process pool, here of one child), a fresh SQLite
database and a fixed session key. Each run submits the correct numba-cpu vector_add
through the JSON API and is watched at once by three clients, each in its own thread, as a
browser would watch it:

* stream: GET /api/v1/runs/{id}/events, the time each message is read off the socket;
* poll 500 ms: GET /runs/{id}/card every 500 ms (the card's htmx trigger), the time a
  response first shows a state (its data-state attribute);
* poll 100 ms: the same every 100 ms.

The delay of a transition is that client's time minus the event's `at`: the moment the web
process's executor got the event from the evaluation child, before the database write. The
`server` column is the stream's share of it: `at` to the moment the message left (the
database write, the hand-over to the stream, the card's render).
(The child's own hop to it, one message on a Unix socket, is outside the figure.) A poll
that never shows a state (the phase was shorter than its period) misses it; misses are
counted, not timed.

    python bench/progress_latency.py [--runs 12] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
import uvicorn  # noqa: E402

from bench.benchlib import ROOT, commit  # noqa: E402
from kplay.app.main import create_app  # noqa: E402
from kplay.config import Settings  # noqa: E402

SOLUTION = ROOT / "kernels/problems/vector_add/solutions/correct/vector_add.numba_cpu.py"
TRANSITIONS = ["compiling", "checking", "timing", "final"]
FINAL = {"done", "wrong", "compile_error", "runtime_error", "timeout", "rejected", "suspicious"}
STATE = re.compile(r'data-state="([a-z_]+)"')
LIMIT_S = 180.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _key(state: str) -> str:
    return "final" if state in FINAL else state


class Stream(threading.Thread):
    """Reads one run's event stream; keeps (state, at, received) of each change."""

    def __init__(self, client: httpx.Client, run_id: str) -> None:
        super().__init__(daemon=True)
        self.client, self.run_id = client, run_id
        self.seen: list[tuple[str, float | None, float, float]] = []
        self.opened = threading.Event()

    def run(self) -> None:
        url = f"/api/v1/runs/{self.run_id}/events"
        with self.client.stream("GET", url, timeout=LIMIT_S) as reply:
            self.opened.set()
            for line in reply.iter_lines():
                if not line.startswith("data: "):
                    continue
                got = time.time()
                data = json.loads(line[6:])
                self.seen.append((data["state"], data.get("at"), data["sent"], got))
                if data["final"]:
                    return


class Poll(threading.Thread):
    """GETs the card every `period_s`, as the page's fallback does; first sight per state."""

    def __init__(self, client: httpx.Client, run_id: str, period_s: float) -> None:
        super().__init__(daemon=True)
        self.client, self.run_id, self.period_s = client, run_id, period_s
        self.first: dict[str, float] = {}

    def run(self) -> None:
        deadline = time.monotonic() + LIMIT_S
        tick = time.monotonic()
        while time.monotonic() < deadline:
            text = self.client.get(f"/runs/{self.run_id}/card").text
            got = time.time()
            match = STATE.search(text)
            state = match.group(1) if match else "?"
            self.first.setdefault(_key(state), got)
            if state in FINAL:
                return
            tick += self.period_s
            time.sleep(max(0.0, tick - time.monotonic()))


def one_run(base: str, cookies: httpx.Cookies, source: str) -> dict[str, Any]:
    with httpx.Client(base_url=base, cookies=cookies, timeout=30.0) as api:
        reply = api.post(
            "/api/v1/runs", json={"problem": "vector_add", "backend": "numba-cpu", "source": source}
        )
        reply.raise_for_status()
        run_id = reply.json()["id"]
        clients = [httpx.Client(base_url=base, cookies=api.cookies, timeout=30.0) for _ in range(3)]
        stream = Stream(clients[0], run_id)
        polls = {
            "poll 500 ms": Poll(clients[1], run_id, 0.5),
            "poll 100 ms": Poll(clients[2], run_id, 0.1),
        }
        for watcher in (stream, *polls.values()):
            watcher.start()
        for watcher in (stream, *polls.values()):
            watcher.join(LIMIT_S)
        for c in clients:
            c.close()
    at: dict[str, float] = {}
    delays: dict[str, dict[str, float | None]] = {"stream": {}, "server": {}}
    for state, when, sent, got in stream.seen:
        key = _key(state)
        if when is None or key in at:
            continue  # the state at connection, or a later detail of the same state
        at[key] = when
        delays["stream"][key] = got - when
        delays["server"][key] = sent - when  # database write, publish, card render
    for name, poll in polls.items():
        delays[name] = {k: (poll.first[k] - at[k] if k in poll.first else None) for k in at}
    final = stream.seen[-1][0] if stream.seen else "?"
    return {"run": run_id, "final": final, "delays": delays}


def _serve(settings: Settings) -> tuple[uvicorn.Server, threading.Thread, str]:
    port = _free_port()
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=port, log_level="warning", lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                return server, thread, base
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the server did not start")


def _stats(values: list[float]) -> str:
    if not values:
        return "—"
    ms = sorted(v * 1000 for v in values)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return f"{statistics.median(ms):.1f} / {p95:.1f} / {ms[-1]:.1f}"


def table(results: list[dict[str, Any]]) -> str:
    names = ["stream", "poll 500 ms", "poll 100 ms", "server"]
    head = "| transition | " + " | ".join(f"{n}: p50 / p95 / max ms (missed)" for n in names)
    lines = [head + " |", "|---" * (len(names) + 1) + "|"]
    for key in TRANSITIONS:
        cells = []
        for name in names:
            got = [r["delays"][name].get(key) for r in results if key in r["delays"]["stream"]]
            timed = [g for g in got if g is not None]
            cells.append(f"{_stats(timed)} ({len(got) - len(timed)} of {len(got)})")
        label = "→ final (done)" if key == "final" else f"→ {key}"
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    source = SOLUTION.read_text()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            database_url=f"sqlite:///{tmp}/kplay.sqlite3",
            secret_key="bench-only-session-key-0123456789abcdef",
            pool_size=1,
            run_rate_per_reader="100000/minute",
            run_rate_per_ip="100000/minute",
        )
        server, thread, base = _serve(settings)
        try:
            cookies = httpx.Client(base_url=base).get("/").cookies
            warm = one_run(base, cookies, source)  # the child compiles and calibrates first
            print(f"warm-up run: {warm['final']}", flush=True)
            results = []
            for i in range(args.runs):
                results.append(one_run(base, cookies, source))
                print(f"run {i + 1}/{args.runs}: {results[-1]['final']}", flush=True)
        finally:
            server.should_exit = True
            thread.join(30)
    print(f"\ncommit {commit()}, {args.runs} runs (after one warm-up run)\n")
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps({"commit": commit(), "runs": results}, indent=1))


if __name__ == "__main__":
    main()
