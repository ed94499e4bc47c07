"""The instructor's dashboard under a full cohort: 300 learners, 25 exercises, 50,000 runs in
PostgreSQL; the server time of the page's first render and of a live update.

A fresh schema on the test server (database `test` on 127.0.0.1, dropped at the end) is
migrated up to 0009, seeded, then migrated to the head (0010 fills `dashboard_cells` from the
runs, timed as `backfill_s`); seeded with: one instructor, 300 learners in one cohort, five
assignments of five of the book's exercise cells each, and 50,000 runs spread over the
learners and the last three days, with a mix of verdicts (correct at times that reach no
tier or one of the tiers, wrong answers, compile errors, runtime errors, time-outs, a few
still running) whose results are the engine's own models dumped as the app stores them.

The app (`create_app`, its real lifespan and routes, a fake executor that runs nothing) is
driven through Starlette's TestClient, logged in as the instructor. Times are the
app's own Server-Timing header (the middleware's time from request to response), with the
client's round trip beside it:

* first render, cold: GET /cohorts/{id}/dashboard with the process's dashboard state
  dropped before each request, so the whole cohort is read from the database (its rows of
  `dashboard_cells`, tiers and best times included, and its runs still going; the failed
  runs by message follow in a thread, and `cold_until_failures_ms` is the time from the
  request until they are in, as the client sees it);
* first render, warm: the same page while the state is kept (a second instructor's page, a
  reload): roster queries, one query for changes, the render;
* live update: GET .../dashboard/updates?since=<cursor> after 1 to 3 new runs of random
  learners were written (the poll with news; polls 5 s apart, as the page makes them), and
  again with none (a quiet poll).

    python bench/dashboard_load.py [--iterations 40] [--json bench/results/dashboard_load.json]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import create_engine, insert, text  # noqa: E402

from bench.benchlib import ROOT, commit  # noqa: E402

POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
LEARNERS, EXERCISES, RUNS = 300, 25, 50_000
PASSWORD = "bench password 0123"
CURSOR = re.compile(r'id="dash-poll" data-cursor="(\d+)"')
TIMING = re.compile(r"app;dur=([0-9.]+)")
MESSAGES = {
    "wrong": ["{k} of 7 cases differ from the reference", "case n={n}: got NaN at index {i}"],
    "compile_error": [
        "the kernel did not compile",
        "kernel.py:{k}: NameError: name 'idx{k}' is not defined",
    ],
    "runtime_error": [
        "IndexError: index {n} is out of bounds for axis 0 with size {n}",
        "the child exited with signal 11 at 0x7ffe{i:04x}",
    ],
    "timeout": ["timed out after {k}0 s"],
}


def _results(job_id: str, problem: str, backend: str, state: str, rng: random.Random) -> Any:
    """A stored result: the engine's models, as records.record_result writes them."""
    from kplay.app.services.records import json_safe
    from kplay.kernels.models import RunJob, RunState
    from tests.app.fakes import compile_error_result, correct_result, wrong_result

    job = RunJob(problem=problem, backend=backend, source="x", job_id=job_id)
    if state == "done":
        result = correct_result(job, rng.choice([45.0, 55.0, 60.0, 80.0, 100.0, 150.0, 400.0]))
        result.verified = True  # as the trusted path marks them: tiers count verified runs only
    elif state == "compile_error":
        result = compile_error_result(job)
    else:
        result = wrong_result(job)
        result.state = RunState(state)
    fill = {"k": rng.randint(1, 6), "n": rng.choice([257, 4096, 65536]), "i": rng.randint(0, 9999)}
    message = result.message
    if state != "done":
        message = rng.choice(MESSAGES[state]).format(**fill)
        result.message = message
    return json_safe(result.model_dump(mode="json")), message


def seed(url: str, rng: random.Random) -> tuple[int, str, float]:
    """Migrate and fill the schema; returns the cohort's id, the instructor's e-mail and
    the seconds migration 0010 took to fill dashboard_cells from the runs."""
    from argon2 import PasswordHasher

    from kplay.app.book import Book
    from kplay.app.db.classroom import Assignment, Cohort, CohortMember
    from kplay.app.db.migrate import upgrade
    from kplay.app.db.models import Run, User
    from kplay.config import Settings
    from kplay.kernels.catalog import load_catalog

    engine = create_engine(url)
    # Runs stored before migration 0010, which fills dashboard_cells from them (timed).
    upgrade(engine, "0009_sso_lti")
    settings = Settings(secret_key="bench-only-session-key-0123456789abcdef")
    catalog = load_catalog()
    book = Book(settings.book_dir, catalog, settings.results_dir)
    cells = [(c.id, c.problem) for p in book.parts() for ch in p.chapters for c in ch.cells]
    cells = cells[:EXERCISES]
    now = datetime.now(UTC)
    hashed = PasswordHasher().hash(PASSWORD)
    with engine.begin() as conn:
        users = [
            {"email": f"learner{i:03d}@example.org", "display_name": f"Learner {i:03d}"}
            for i in range(LEARNERS)
        ]
        users.append({"email": "instructor@example.org", "display_name": "The instructor"})
        for u in users:
            u.update(created_at=now, password_hash=hashed, role="learner", hide_name=False)
        users[-1]["role"] = "instructor"
        conn.execute(insert(User), users)
        ids = list(conn.execute(text("select id from users order by id")).scalars())
        teacher = ids[-1]
        cohort = conn.execute(
            insert(Cohort).returning(Cohort.id),
            {
                "name": "Bench cohort",
                "join_code": "BENCH01",
                "created_by": teacher,
                "created_at": now,
            },
        ).scalar_one()
        members = [
            {"cohort_id": cohort, "user_id": uid, "role": "learner", "joined_at": now}
            for uid in ids[:-1]
        ]
        members.append(
            {"cohort_id": cohort, "user_id": teacher, "role": "instructor", "joined_at": now}
        )
        conn.execute(insert(CohortMember), members)
        conn.execute(
            insert(Assignment),
            [
                {
                    "cohort_id": cohort,
                    "title": f"Week {w + 1}",
                    "exercises": [c for c, _p in cells[w * 5 : w * 5 + 5]],
                    "deadline": now + timedelta(days=7),
                    "created_at": now,
                }
                for w in range(5)
            ],
        )
        states = ["done"] * 45 + ["wrong"] * 30 + ["compile_error"] * 12
        # The last, 'timing': still going (a non-final state runs have).
        states += ["runtime_error"] * 8 + ["timeout"] * 4 + ["timing"]
        batch = []
        for n in range(RUNS):
            learner = ids[rng.randrange(LEARNERS)]
            cell, problem = cells[min(int(rng.expovariate(1 / 8)), EXERCISES - 1)]
            state = rng.choice(states)
            created = now - timedelta(minutes=rng.uniform(1, 3 * 24 * 60))
            run_id = uuid.uuid4().hex
            result, message = (None, None)
            if state != "timing":
                result, message = _results(run_id, problem, "numba-cpu", state, rng)
            batch.append(
                {
                    "id": run_id,
                    "created_at": created,
                    "updated_at": created + timedelta(seconds=20),
                    "started_at": created,
                    "finished_at": None if result is None else created,
                    "user": f"acct:{learner}",
                    "cell_id": cell,
                    "chapter": None,
                    "problem": problem,
                    "backend": "numba-cpu",
                    "source": f"# attempt {n}\nimport numba\n",
                    "launch": None,
                    "state": state,
                    "detail": message,
                    "result": result,
                    "share_token": None,
                    "profile_of": None,
                }
            )
            if len(batch) == 5000:
                conn.execute(insert(Run), batch)
                batch = []
        if batch:
            conn.execute(insert(Run), batch)
    started = time.perf_counter()
    upgrade(engine)
    backfill_s = time.perf_counter() - started
    with engine.begin() as conn:
        conn.execute(text("ANALYZE"))
    engine.dispose()
    return cohort, "instructor@example.org", backfill_s


def add_runs(url_engine: Any, learners: list[int], cells: list[str], rng: random.Random) -> int:
    """1 to 3 new finished runs of random learners, written now: the news of the next poll.
    Their pairs' dashboard rows are made again in the same transaction, as
    records.record_result does with a verdict."""
    from kplay.app.db.models import Run
    from kplay.app.services.dashboard_cells import refresh

    now = datetime.now(UTC)
    rows = []
    for _ in range(rng.randint(1, 3)):
        run_id = uuid.uuid4().hex
        result, message = _results(run_id, "vector_add", "numba-cpu", "wrong", rng)
        rows.append(
            {
                "id": run_id,
                "created_at": now,
                "updated_at": now,
                "started_at": now,
                "finished_at": now,
                "user": f"acct:{rng.choice(learners)}",
                "cell_id": rng.choice(cells),
                "chapter": None,
                "problem": "vector_add",
                "backend": "numba-cpu",
                "source": "# new\n",
                "launch": None,
                "state": "wrong",
                "detail": message,
                "result": result,
                "share_token": None,
                "profile_of": None,
            }
        )
    with url_engine.begin() as conn:
        conn.execute(insert(Run), rows)
        refresh(conn, [(r["user"], r["cell_id"]) for r in rows])
    return len(rows)


def _say(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "p50": round(statistics.median(ordered), 2),
        "p95": round(p95, 2),
        "min": round(ordered[0], 2),
        "max": round(ordered[-1], 2),
        "n": len(ordered),
    }


def measure(
    url: str, cohort: int, email: str, iterations: int, rng: random.Random
) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    from kplay.app.main import create_app
    from kplay.config import Settings
    from tests.app.fakes import FakeExecutor
    from tests.app.test_accounts import log_in

    settings = Settings(database_url=url, secret_key="bench-only-session-key-0123456789abcdef")
    app = create_app(settings, FakeExecutor())
    engine = create_engine(url)
    with engine.connect() as conn:
        learners = [
            int(r)
            for r in conn.execute(
                text("select user_id from cohort_members where role = 'learner'")
            ).scalars()
        ]
        cells = sorted({str(c) for c in conn.execute(text("select cell_id from runs")).scalars()})
    out: dict[str, list[float]] = {k: [] for k in ("cold", "warm", "update", "quiet")}
    wall: dict[str, list[float]] = {k: [] for k in out}
    sizes: dict[str, int] = {}
    tiers: list[float] = []
    page_path = f"/cohorts/{cohort}/dashboard"
    with TestClient(app) as client:
        assert log_in(client, email, PASSWORD).status_code == 303  # type: ignore[attr-defined]

        def get(kind: str, path: str) -> str:
            started = time.perf_counter()
            reply = client.get(path)
            wall[kind].append((time.perf_counter() - started) * 1000)
            assert reply.status_code == 200, (path, reply.status_code, reply.text[:300])
            found = TIMING.search(reply.headers["server-timing"])
            assert found is not None
            out[kind].append(float(found.group(1)))
            sizes[kind] = len(reply.content)
            return reply.text

        _say("measuring")
        get("cold", page_path)  # the first of all: imports, template compilation
        out["cold"].clear()
        wall["cold"].clear()
        for _ in range(iterations):
            app.state.dashboards = None  # the next page reads the cohort in full
            started = time.perf_counter()
            get("cold", page_path)
            # The failures by message follow in a thread: how long until they are in.
            while not app.state.dashboards.peek(cohort).failures_ready:
                time.sleep(0.01)
            tiers.append((time.perf_counter() - started) * 1000)
        _say(f"cold {statistics.median(out['cold']):.1f} ms")
        for _ in range(iterations):
            page = get("warm", page_path)
        _say(f"warm {statistics.median(out['warm']):.1f} ms")
        cursor = CURSOR.search(page)
        assert cursor is not None
        since = cursor.group(1)
        for _ in range(iterations):
            add_runs(engine, learners, cells, rng)
            update = get("update", f"{page_path}/updates?since={since}")
            assert "hx-swap-oob" in update and "<template><td" in update, update[:500]
            found = CURSOR.search(update)
            assert found is not None
            since = found.group(1)
            time.sleep(POLL_S)  # as the page polls: its cursor is one poll old
        # The first quiet poll still carries the last news (the cursor reaches back
        # OVERLAP); from the next one on, nothing.
        time.sleep(OVERLAP_S + 0.1)
        since = CURSOR.search(client.get(f"{page_path}/updates?since={since}").text).group(1)  # type: ignore[union-attr]
        for _ in range(iterations):
            found = CURSOR.search(get("quiet", f"{page_path}/updates?since={since}"))
            assert found is not None
            since = found.group(1)
        assert "<template><td" not in client.get(f"{page_path}/updates?since={since}").text
    engine.dispose()
    return {
        "server_ms": {k: summary(v) for k, v in out.items()},
        "client_ms": {k: summary(v) for k, v in wall.items()},
        "cold_until_failures_ms": summary(tiers),
        "bytes": sizes,
    }


OVERLAP_S = 5.0  # app.services.dashboard.OVERLAP
POLL_S = 5.0  # app.routers.dashboard.POLL_S


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--json", type=Path, default=ROOT / "bench/results/dashboard_load.json")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    base = create_engine(POSTGRES)
    schema = f"dash_bench_{uuid.uuid4().hex[:10]}"
    with base.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = f"{POSTGRES}?options=-csearch_path%3D{schema}"
    try:
        started = time.perf_counter()
        cohort, email, backfill_s = seed(url, rng)
        seeded_s = time.perf_counter() - started
        _say(f"seeded in {seeded_s:.1f} s")
        figures = measure(url, cohort, email, args.iterations, rng)
    finally:
        with base.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        base.dispose()
    report = {
        "commit": commit(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "learners": LEARNERS,
        "exercises": EXERCISES,
        "runs": RUNS,
        "iterations": args.iterations,
        "seed_s": round(seeded_s, 1),
        "backfill_s": round(backfill_s, 1),
        "bars_ms": {"first_render_p50": 150, "update_p50": 50},
        **figures,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
