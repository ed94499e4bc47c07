"""The figures of a load test (bench/loadtest.py): what each run did, and the tables."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from kplay.kernels.models import FINAL_STATES

FINAL = {state.value for state in FINAL_STATES}  # the engine's own list of final states


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
    events: int = 0  # card messages read from the run's event stream
    last_position: int | None = None  # what the last card said, for a run left non-final
    lost: bool = False
    error: str | None = None


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
