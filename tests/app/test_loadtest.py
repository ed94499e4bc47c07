"""The load-test driver (bench/loadtest.py), small and fast: three learners for eight seconds
against the real app over HTTP, runs evaluated by a real local pool with a stand-in
evaluation (bench.celery_overhead:trivial), so only the web path and the queue are timed."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from bench import loadtest
from bench.loadtest_figures import FINAL, RunRecord, estimate_accuracy
from bench.loadtest_sources import loop_forever
from kplay.app.main import create_app
from kplay.config import Settings
from kplay.workers.limits import Limits
from kplay.workers.local import LocalExecutor


@pytest.fixture
def server(make_settings: Callable[..., Settings]) -> Iterator[str]:
    executor = LocalExecutor(1, Limits(wall_timeout_s=20), target="bench.celery_overhead:trivial")
    app = create_app(make_settings(), executor=executor)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}"
    warm_up(base)
    try:
        yield base
    finally:
        srv.should_exit = True
        thread.join(timeout=15)


def warm_up(base: str) -> None:
    """One run through the API first: the pool's child starts (slowly on a busy machine)
    before the learners' seconds are counted."""
    body = {"problem": "vector_add", "backend": "numba-cpu", "source": "ok"}
    with httpx.Client(base_url=base, timeout=30) as client:
        url = client.post("/api/v1/runs", json=body).json()["url"]
        deadline = time.monotonic() + 120
        while client.get(url).json()["state"] not in FINAL:
            assert time.monotonic() < deadline, "the warm-up run did not end"
            time.sleep(0.1)


def test_three_learners_read_run_and_every_run_ends(server: str, tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    argv = ["--target", server, "--learners", "3", "--duration", "8", "--drain", "8"]
    argv += ["--arrival", "0.1", "--read-min", "0.1", "--read-max", "0.3"]
    argv += ["--edit-min", "0.1", "--edit-max", "0.3", "--out", str(out)]
    assert loadtest.main(argv) == 0
    result = json.loads(out.read_text())

    requests = result["requests"]
    for kind in ("index", "chapter", "static", "submit", "history", "api-run"):
        assert requests[kind]["requests"] > 0, kind
        assert requests[kind]["failed"] == 0, kind
    assert set(requests["chapter"]["status"]) == {"200"}
    assert requests["chapter"]["client_ms"]["p95"] is not None
    runs = result["runs"]
    assert runs["accepted"] >= 3
    assert runs["lost"] == 0
    assert runs["non_final"] == 0
    records = [r for r in result["run_records"] if r["run_id"]]
    assert records and all(r["final_state"] in FINAL for r in records)
    assert all(r["queued_s_server"] is not None for r in records)
    # Followed as the page follows a card: by the run's event stream, never by polling.
    assert requests["events"]["requests"] > 0 and requests["events"]["failed"] == 0
    assert all(r["events"] > 0 for r in records if r["state_at_submit"] not in FINAL)
    assert sum(r["polls"] for r in records) == 0
    # Each learner had its own address, so no per-address limit counted them together.
    assert result["source_addresses"] is True
    assert {r["learner"] for r in records} == {0, 1, 2}


def test_a_loop_is_put_at_the_top_of_the_kernel_body() -> None:
    source = (
        "import numba\n\n@numba.njit(\n    cache=True)\n"
        "def add(a,\n        b):  # two inputs\n    # sum them\n    return a + b\n"
    )
    looped = loop_forever(source)
    assert looped is not None
    assert "b):  # two inputs\n    # sum them\n    while True:\n        pass\n    return a + b" in (
        looped
    )
    assert loop_forever("x = 1\n") is None


def test_estimate_accuracy_counts_a_queued_run_without_an_estimate_as_a_miss() -> None:
    def record(position: int, estimate: float | None, real: float) -> RunRecord:
        r = RunRecord(0, "c", "p", "numba-cpu", "correct", "n", 0.0)
        r.run_id, r.final_state = "x" * 32, "done"
        r.position_at_submit, r.estimate_s, r.queued_s_server = position, estimate, real
        return r

    found = estimate_accuracy(
        [record(2, 10.0, 12.0), record(3, 10.0, 20.0), record(1, None, 5.0), record(0, None, 0.1)]
    )
    assert found["queued_runs"] == 3
    assert found["with_estimate"] == 2
    assert found["within_30pct"] == 1
    assert found["share_within_30pct"] == pytest.approx(1 / 3)
