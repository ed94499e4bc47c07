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
a POST of the editor's source with HX-Request, then the run's event stream read until the
card is final (`--follow poll`: the card polled every 500 ms, the page's fallback), then the
cell's history. Sources are real: the problem's starter, a correct or a wrong
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
import ipaddress
import json
import os
import shutil
import statistics
import sys
import tempfile
from collections import Counter
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from bench.benchlib import commit  # noqa: E402
from bench.loadtest_figures import RunRecord, markdown, run_figures, spread  # noqa: E402
from bench.loadtest_learner import Config, Learner, Recorder  # noqa: E402
from bench.loadtest_servers import Deployment  # noqa: E402
from bench.loadtest_sources import Sources, load_book  # noqa: E402

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
        if args.database is not None:
            # A server with history: its earlier runs, as a restart would find them.
            shutil.copyfile(args.database, work / "kplay.sqlite3")
            # and the run durations it kept beside it (the wait estimate's prior), if any
            kept = Path(f"{args.database}-waits.json")
            if kept.is_file():
                shutil.copyfile(kept, work / "kplay.sqlite3-waits.json")
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
        follow=args.follow,
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
        "database": str(args.database) if getattr(args, "database", None) else None,
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
    parser.add_argument(
        "--follow",
        choices=["stream", "poll"],
        default="stream",
        help="how a learner follows its run's card: the event stream, as the page does "
        "(default), or the card's 500 ms poll, the page's fallback",
    )
    parser.add_argument("--out", type=Path, help="write the JSON here")
    parser.add_argument(
        "--raw-requests", action="store_true", help="keep every request's timing in the JSON"
    )
    parser.add_argument("--keep", action="store_true", help="keep the server's data folder")
    parser.add_argument(
        "--database",
        type=Path,
        metavar="SQLITE",
        help="start the server on a copy of this database (one kept from an earlier run)",
    )
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
