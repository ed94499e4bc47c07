"""The progress stream of a run (GET /api/v1/runs/{id}/events): events in order, the final
state always, resumption with Last-Event-ID, the database's word when this process heard
nothing, and nothing for a reader who may not see the run."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from kplay.app.services import records
from kplay.app.services.live import ProgressHub
from kplay.kernels.models import RunState
from tests.app.fakes import FakeExecutor, correct_result

GOOD = {
    "problem": "vector_add",
    "backend": "numba-cpu",
    "source": "import numba\n\n@numba.njit\ndef vector_add(a, b, out, n):\n    pass\n",
}
LIVE = ["compiling", "checking", "timing"]


def _messages(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """Each `card` message as {"event_id": ..., **data}, in arrival order."""
    fields: dict[str, str] = {}
    for line in lines:
        if line:
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
            continue
        if fields.get("event") == "card":
            yield {"event_id": fields.get("id"), **json.loads(fields["data"])}
        fields = {}


def _read(
    client: TestClient, run_id: str, then: Any = None, **headers: str
) -> list[dict[str, Any]]:
    """Every message to the end of the stream; `then` runs once the first has arrived."""
    with client.stream("GET", f"/api/v1/runs/{run_id}/events", headers=headers) as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        messages = _messages(reply.iter_lines())
        got = [next(messages)]
        if then is not None:
            then()
        return got + list(messages)


def _start(client: TestClient) -> str:
    created = client.post("/api/v1/runs", json={**GOOD, "cell": "ch01-vadd-cpu"})
    assert created.status_code == 201
    return str(created.json()["id"])


def _in_a_moment(work: Any) -> Any:
    """`work` on another thread (as an executor reports), a little after it is asked for."""

    def start() -> None:
        threading.Timer(0.1, work).start()

    return start


@pytest.mark.parametrize("executor", [FakeExecutor(hold=True)])
def test_the_stream_walks_through_the_states_and_ends_with_the_verdict(
    client: TestClient, executor: FakeExecutor
) -> None:
    run_id = _start(client)
    started = time.time()
    got = _read(client, run_id, then=_in_a_moment(lambda: executor.release(run_id)))
    assert [m["state"] for m in got] == ["queued", *LIVE, "done"]
    # Numbered in order; every change but the first (the state at connection) says when.
    numbers = [int(m["event_id"].rpartition("-")[2]) for m in got]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    assert "at" not in got[0] and all(started <= m["at"] <= m["sent"] for m in got[1:])
    assert [m["final"] for m in got] == [False] * 4 + [True]
    timing = got[3]["html"]
    assert 'data-timing-bar role="progressbar"' in timing and 'data-cap-s="0.3"' in timing
    assert 'data-state="timing"' in timing and "data-events-url" in timing
    final = got[-1]["html"]
    assert 'data-final="true"' in final and "Correct" in final and "data-events-url" not in final


@pytest.mark.parametrize("executor", [FakeExecutor(hold=True)])
def test_a_reconnect_gets_what_it_missed_and_nothing_twice(
    client: TestClient, executor: FakeExecutor
) -> None:
    run_id = _start(client)
    executor.progress(run_id, RunState.compiling, "compiling")
    with client.stream("GET", f"/api/v1/runs/{run_id}/events") as reply:
        first = next(_messages(reply.iter_lines()))
    assert first["state"] == "compiling"
    executor.release(run_id)  # checking, timing, done while nobody listens
    got = _read(client, run_id, **{"Last-Event-ID": first["event_id"]})
    assert [m["state"] for m in got] == ["compiling", *LIVE][1:] + ["done"]
    assert got[0]["event_id"] != first["event_id"] and got[-1]["final"]
    # An id this process did not make (another server, or this one before a restart):
    # the stream starts from the database, which has the verdict.
    again = _read(client, run_id, **{"Last-Event-ID": "0badc0de-2"})
    assert [m["state"] for m in again] == ["done"]


@pytest.mark.parametrize("executor", [FakeExecutor(hold=True)])
def test_a_verdict_this_process_was_not_told_of_arrives_from_the_database(
    client: TestClient, app: FastAPI, executor: FakeExecutor
) -> None:
    run_id = _start(client)
    job = executor.pending.pop(run_id)
    # As when another web process took the verdict off the result stream: stored, not told.
    db = app.state.services.db
    started = time.monotonic()
    got = _read(client, run_id, then=lambda: records.record_result(db, correct_result(job)))
    assert [m["state"] for m in got] == ["queued", "done"]
    assert time.monotonic() - started < 5.0


def test_a_finished_run_streams_its_verdict_and_ends(client: TestClient) -> None:
    run_id = _start(client)
    got = _read(client, run_id)
    assert [m["state"] for m in got] == ["done"] and got[0]["final"]


def test_another_reader_is_refused(app: FastAPI) -> None:
    with TestClient(app) as alice, TestClient(app) as mallory:
        run_id = _start(alice)
        for who in (mallory, alice):
            reply = who.get(f"/api/v1/runs/{'0' * 32}/events")
            assert reply.status_code == 404
        reply = mallory.get(f"/api/v1/runs/{run_id}/events")
        assert reply.status_code == 404 and reply.json() == {"detail": f"no run {run_id!r}"}
        assert "event:" not in reply.text


@pytest.mark.parametrize("executor", [FakeExecutor(hold=True)])
def test_a_card_in_flight_names_its_stream_and_keeps_its_poll(
    client: TestClient, executor: FakeExecutor
) -> None:
    run_id = _start(client)
    executor.progress(run_id, RunState.timing)
    card = client.get(f"/runs/{run_id}/card").text
    assert f'data-events-url="/api/v1/runs/{run_id}/events"' in card
    assert 'hx-trigger="every 500ms"' in card  # the fallback where no stream can be opened
    assert 'role="progressbar"' in card and "at most 300 ms" in card


def test_the_hub_keeps_order_and_says_when_it_lost_events() -> None:
    hub = ProgressHub(keep_runs=2, keep_events=3)
    for state in ("compiling", "checking", "timing"):
        hub.publish("a", state, None)
    assert [e.state for e in hub.since("a", 1) or []] == ["checking", "timing"]
    assert hub.since("a", 3) == [] and hub.since("a", 7) is None
    hub.publish("a", "done", "Correct.")
    assert hub.since("a", 0) is None  # the first event is no longer kept
    assert hub.publish("a", "timing", None) is None  # nothing after the verdict
    hub.publish("b", "compiling", None)
    hub.publish("c", "compiling", None)
    assert hub.since("a", 3) is None  # the oldest run was forgotten
    assert hub.parse_id(hub.event_id(4)) == 4 and hub.parse_id("other-4") is None
