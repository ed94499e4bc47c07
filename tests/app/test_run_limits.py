"""Limits on starting runs: the per-user cap on runs in flight, counted from the database in
every mode (the local executor has no cap of its own), and the rate limits per reader and
per client address, each refused with a 429 that says why."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from kplay.app.main import create_app
from kplay.config import Settings
from tests.app.fakes import FakeExecutor

GOOD = {
    "problem": "vector_add",
    "backend": "numba-cpu",
    "source": "import numba\n\n@numba.njit\ndef vector_add(a, b, out, n):\n    pass\n",
}
PAGE = {"HX-Request": "true"}
FORM = {"backend": "numba-cpu", "source": GOOD["source"]}


def test_the_cap_counts_a_readers_runs_in_flight(make_settings: Callable[..., Settings]) -> None:
    executor = FakeExecutor(hold=True)
    app = create_app(make_settings(user_run_cap=2), executor)
    with TestClient(app) as alice, TestClient(app) as bob:
        first = alice.post("/api/v1/runs", json=GOOD).json()["id"]
        alice.post("/api/v1/runs", json=GOOD)
        refused = alice.post("/api/v1/runs", json=GOOD)
        assert refused.status_code == 429
        assert refused.json()["detail"] == (
            "you already have 2 runs queued or running (the limit is 2); "
            "wait for one of them to finish"
        )
        assert len(executor.jobs) == 2  # the refused run was never stored nor handed over
        assert bob.post("/api/v1/runs", json=GOOD).status_code == 201  # a cap per reader
        executor.release(first)
        assert alice.post("/api/v1/runs", json=GOOD).status_code == 201


def test_the_cap_answers_a_page_with_the_cells_card(
    make_settings: Callable[..., Settings],
) -> None:
    app = create_app(make_settings(user_run_cap=1), FakeExecutor(hold=True))
    with TestClient(app) as client:
        client.get("/")
        assert client.post("/cells/ch01-vadd-cpu/runs", data=FORM, headers=PAGE).status_code == 201
        card = client.post("/cells/ch01-vadd-cpu/runs", data=FORM, headers=PAGE)
        assert card.status_code == 429 and "data-input-error" in card.text
        assert "1 runs queued or running (the limit is 1)" in card.text


def test_no_cap_when_it_is_zero(make_settings: Callable[..., Settings]) -> None:
    app = create_app(make_settings(user_run_cap=0), FakeExecutor(hold=True))
    with TestClient(app) as client:
        assert all(client.post("/api/v1/runs", json=GOOD).status_code == 201 for _ in range(8))


def test_the_local_executor_is_capped_too(make_settings: Callable[..., Settings]) -> None:
    """The embedded mode's own executor, started for real: the cap holds before it."""
    from kplay.workers.local import LocalExecutor

    class Idle(LocalExecutor):
        def start(self, sink: object) -> None:  # no children: the jobs just wait in line
            self._pool = object()  # type: ignore[assignment]

        def stop(self) -> None:
            self._pool = None

    settings = make_settings(user_run_cap=3)
    with TestClient(create_app(settings, Idle(1))) as client:
        codes = [client.post("/api/v1/runs", json=GOOD).status_code for _ in range(4)]
    assert codes == [201, 201, 201, 429]


@pytest.mark.parametrize("where", ["api", "page"])
def test_a_reader_starting_runs_too_fast_is_told_when_to_come_back(
    make_settings: Callable[..., Settings], where: str
) -> None:
    app = create_app(make_settings(run_rate_per_reader="3/minute"), FakeExecutor())
    with TestClient(app) as client, TestClient(app) as other:
        client.get("/")

        def start(c: TestClient) -> object:
            if where == "api":
                return c.post("/api/v1/runs", json=GOOD)
            return c.post("/cells/ch01-vadd-cpu/runs", data=FORM, headers=PAGE)

        codes = [start(client).status_code for _ in range(3)]  # type: ignore[attr-defined]
        refused = start(client)
        assert codes == [201] * 3 and refused.status_code == 429  # type: ignore[attr-defined]
        wait = int(refused.headers["retry-after"])  # type: ignore[attr-defined]
        assert 1 <= wait <= 60
        text = refused.text  # type: ignore[attr-defined]
        assert "too many runs started from this browser session: 3 per 1 minute allowed" in text
        assert f"try again in {wait} s" in text
        assert start(other).status_code == 201  # type: ignore[attr-defined]


def test_an_address_is_limited_whatever_its_cookies(
    make_settings: Callable[..., Settings],
) -> None:
    app = create_app(make_settings(run_rate_per_ip="4/hour"), FakeExecutor())
    codes = []
    for _ in range(5):
        with TestClient(app) as fresh:  # a new reader each time, from the same address
            reply = fresh.post("/api/v1/runs", json=GOOD)
            codes.append(reply.status_code)
    assert codes == [201] * 4 + [429]
    assert "from this address: 4 per 1 hour allowed" in reply.json()["detail"]
    assert int(reply.headers["retry-after"]) > 60


def test_counters_are_per_app(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(run_rate_per_ip="1/hour")
    for _ in range(2):
        with TestClient(create_app(settings, FakeExecutor())) as client:
            assert client.post("/api/v1/runs", json=GOOD).status_code == 201


def test_a_rate_that_does_not_parse_is_named() -> None:
    with pytest.raises(ValueError, match="run_rate_per_reader"):
        Settings(database_url="sqlite://", run_rate_per_reader="plenty")


def test_slowapis_own_variables_cannot_switch_the_limits_off(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATELIMIT_ENABLED", "false")
    app = create_app(make_settings(run_rate_per_reader="1/minute"), FakeExecutor())
    with TestClient(app) as client:
        codes = [client.post("/api/v1/runs", json=GOOD).status_code for _ in range(2)]
    assert codes == [201, 429]
