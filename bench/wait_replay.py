"""Replay a load test's queue through the wait estimator, after the fact, with other rules.

`bench/loadtest.py --out` records each run's submit time, queue wait and run time as the
server stored them; the embedded server's durations file holds how long each run held its
worker, in the order they ended. From the two, the queue can be rebuilt at the moment of
every submit (the runs that were evaluating, with how long they had run, and those queued
ahead, in order) and `kplay.workers.waits.start_in_s` asked again with the durations known
by then, under each rule for an earlier server's durations (the prior):

- `none`: no prior, only the durations of this server's runs ended so far;
- `either`: the prior answers at a level only until this server has MIN_SAMPLES of its
  own there (the rule before the prior was merged);
- `merged`: the prior's durations, then this server's, the latest KEPT of both
  (`kplay.workers.waits.Durations`, as the server runs it).

    python bench/wait_replay.py RUN.json HOLDS.json [--prior PRIOR.json]

HOLDS.json is the durations file written during that run (`kplay.sqlite3-waits.json`, or
the machine's `waits/embedded-<n>.json`, of which the last entries are taken: one per
evaluated run but the children's first); PRIOR.json the one the server started with. The
replay takes a kind as (problem, backend) and 30 s as the time limit (`--limit`), and
reports what the load test reports: queued runs, how many would have shown an estimate,
and how many within 30% of the real wait.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kplay.workers.waits import MIN_SAMPLES, Durations, pick, start_in_s  # noqa: E402

LIMIT_S = 30.0


class Either(Durations):
    """The earlier rule: at each level, this server's own durations once it has MIN_SAMPLES
    there, else the prior's."""

    def samples(self, kind: tuple[str, ...]) -> list[float]:
        own = self.own(kind)
        if self.prior is None:
            return list(pick(*own))
        earlier = self.prior.own(kind)
        return list(pick(*[found for pair in zip(own, earlier, strict=True) for found in pair]))


def evaluated_runs(run: dict[str, Any], holds: list[list[Any]], workers: int) -> list[dict]:
    """The evaluated runs with their start, end, kind and hold time (the durations file's
    entries matched in order of ending; the first `workers` runs, each a child's first,
    have none and keep their run time)."""
    runs = []
    for r in run["run_records"]:
        if r.get("final_state") in (None, "rejected") or r.get("run_s_server") is None:
            continue
        if r.get("queued_s_server") is None:
            continue
        start = r["submit_at"] + r["queued_s_server"]
        runs.append({**r, "start": start, "end": start + r["run_s_server"],
                     "kind": (r["problem"], r["backend"]), "hold": r["run_s_server"]})  # fmt: skip
    firsts = {id(r) for r in sorted(runs, key=lambda r: r["start"])[:workers]}
    ended = [r for r in sorted(runs, key=lambda r: r["end"]) if id(r) not in firsts]
    for r in runs:
        r["first"] = id(r) in firsts  # left out of the durations, as the server does
    for r, entry in zip(ended, holds[-len(ended) :] if ended else [], strict=False):
        r["hold"] = float(entry[-1])
    return runs


def replay(
    runs: list[dict], rule: str, prior: list[list[Any]], workers: int, limit_s: float = LIMIT_S
) -> dict:
    earlier = None
    if rule != "none" and prior:
        earlier = Durations()
        for *kind, seconds in prior:
            earlier.add(tuple(kind[:2]), float(seconds))
    errors, queued, shown = [], 0, 0
    by_end = sorted(runs, key=lambda r: r["start"] + r["hold"])
    for r in runs:
        if not r.get("position_at_submit"):
            continue
        queued += 1
        t = r["submit_at"]
        durations = (Either if rule == "either" else Durations)(prior=earlier)
        for done in by_end:
            if done["start"] + done["hold"] > t:
                break
            if not done["first"]:
                durations.add(done["kind"], done["hold"])
        running = [(x["kind"], t - x["start"]) for x in runs if x["start"] <= t < x["end"]]
        ahead = [x["kind"] for x in sorted(runs, key=lambda x: x["submit_at"])
                 if x["submit_at"] < t < x["start"]]  # fmt: skip
        estimate = start_in_s(running, ahead, workers, durations.samples, limit_s)
        if estimate is None:
            continue
        shown += 1
        errors.append((estimate - r["queued_s_server"]) / max(r["queued_s_server"], 1e-9))
    within = sum(1 for e in errors if abs(e) <= 0.3)
    return {
        "rule": rule,
        "queued_runs": queued,
        "with_estimate": shown,
        "within_30pct": within,
        "share_within_30pct": within / queued if queued else None,
        "median_signed_rel_error": statistics.median(errors) if errors else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path, help="bench/loadtest.py --out file")
    parser.add_argument("holds", type=Path, help="the durations file written in that run")
    parser.add_argument("--prior", type=Path, help="the durations file the server started with")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit", type=float, default=LIMIT_S, help="the run's time limit, s")
    args = parser.parse_args()
    run = json.loads(args.run.read_text())
    holds = json.loads(args.holds.read_text())["durations"]
    prior = json.loads(args.prior.read_text())["durations"] if args.prior else []
    runs = evaluated_runs(run, holds, args.workers)
    print(f"{len(runs)} evaluated runs, MIN_SAMPLES {MIN_SAMPLES}")
    print("| rule | queued | shown | within 30% | share | median signed error |")
    print("|---|---|---|---|---|---|")
    for rule in ("none", "either", "merged") if prior else ("none",):
        f = replay(runs, rule, prior, args.workers, args.limit)
        share = f"{f['share_within_30pct']:.0%}" if f["share_within_30pct"] is not None else "-"
        med = f["median_signed_rel_error"]
        print(f"| {rule} | {f['queued_runs']} | {f['with_estimate']} | {f['within_30pct']} "
              f"| {share} | {'-' if med is None else f'{med:+.0%}'} |")  # fmt: skip


if __name__ == "__main__":
    main()
