"""Trusted local mode: where evaluation children are not sandboxed, the server says so at
start and on every page, and takes runs from this machine only; reading stays open.

The executor here is the fake one, reporting a sandbox status as `LocalExecutor.sandbox`
does (embedded mode) or a fleet whose workers report theirs (distributed mode). A client
on another machine is Starlette's TestClient with another client address.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from kplay.app import main as app_main
from kplay.app.localmode import LOCAL_ONLY, LocalMode, is_loopback
from kplay.app.main import create_app
from kplay.config import Settings
from kplay.workers.fleet_models import FleetSnapshot, LiveWorker
from kplay.workers.sandbox import SandboxStatus
from tests.app.fakes import FakeExecutor

RUN = {
    "problem": "vector_add",
    "backend": "numba-cpu",
    "source": "import numba\n\n@numba.njit\ndef vector_add(a, b, out, n):\n    pass\n",
}
FORM = {"backend": "numba-cpu", "source": RUN["source"]}
PAGE = {"HX-Request": "true"}
CHAPTER = "/book/p1/first-kernel-cpu"
CELL = "/cells/ch01-vadd-cpu/runs"

ELSEWHERE = ("203.0.113.7", 50000)
LOOPBACK = ("127.0.0.1", 50000)
LOOPBACK6 = ("::1", 50000)

UNSANDBOXED = SandboxStatus(mode="auto", notes=["bubblewrap (bwrap) is not installed"])
SANDBOXED = SandboxStatus(mode="auto", active=True, bwrap="/usr/bin/bwrap", seccomp=True)


class ReportingExecutor(FakeExecutor):
    """The fake executor with a pool status, as LocalExecutor reports it."""

    def __init__(self, sandbox: SandboxStatus) -> None:
        super().__init__()
        self.sandbox = sandbox


class FleetExecutor(FakeExecutor):
    """The fake executor as a distributed one: workers report their own sandbox."""

    def __init__(self, *statuses: SandboxStatus | None) -> None:
        super().__init__()
        self.statuses = list(statuses)
        self.snapshots = 0

    def fleet_snapshot(self) -> FleetSnapshot:
        self.snapshots += 1
        workers = [
            LiveWorker(
                id=f"cpu-{i}",
                kind="cpu",
                device="Fake Device 9000",
                sandbox=None if s is None else s.model_dump(mode="json"),
            )
            for i, s in enumerate(self.statuses)
        ]
        return FleetSnapshot(mode="distributed", workers=workers, generated_at=time.time())


@pytest.fixture
def make_app(make_settings: Callable[..., Settings]) -> Callable[..., FastAPI]:
    def make(executor: FakeExecutor, **kw: Any) -> FastAPI:
        return create_app(make_settings(), executor, **kw)

    return make


@contextmanager
def client_at(app: FastAPI, address: tuple[str, int]) -> Iterator[TestClient]:
    with TestClient(app, client=address) as client:
        yield client


# ---------------------------------------------------------------- who may start a run


def test_in_trusted_local_mode_a_run_from_another_machine_is_refused(make_app) -> None:
    executor = ReportingExecutor(UNSANDBOXED)
    with client_at(make_app(executor), ELSEWHERE) as client:
        api = client.post("/api/v1/runs", json=RUN)
        page = client.post(CELL, data=FORM, headers=PAGE)
        assert client.get(CHAPTER).status_code == 200  # reading stays open
    assert api.status_code == 403
    assert api.json()["detail"] == LOCAL_ONLY
    assert "without a sandbox" in LOCAL_ONLY and "only from this machine" in LOCAL_ONLY
    assert page.status_code == 403 and "without a sandbox" in page.text  # the cell's card
    assert executor.jobs == []  # nothing was stored or handed over


@pytest.mark.parametrize("address", [LOOPBACK, LOOPBACK6, ("127.8.9.10", 1)])
def test_in_trusted_local_mode_this_machine_may_start_runs(make_app, address) -> None:
    executor = ReportingExecutor(UNSANDBOXED)
    with client_at(make_app(executor), address) as client:
        assert client.post("/api/v1/runs", json=RUN).status_code == 201
        assert client.post(CELL, data=FORM, headers=PAGE).status_code == 201
    assert len(executor.jobs) == 2


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Forwarded-For": "203.0.113.7"},
        {"X-Forwarded-For": "127.0.0.1, 198.51.100.2"},
        {"X-Real-IP": "198.51.100.2"},
        {"Forwarded": 'for="[2001:db8::1]:4711";proto=https'},
        {"Forwarded": "for=unknown"},
        {"Forwarded": "by=127.0.0.1"},
    ],
)
def test_a_local_proxy_forwarding_another_machine_is_refused(make_app, headers) -> None:
    with client_at(make_app(ReportingExecutor(UNSANDBOXED)), LOOPBACK) as client:
        refused = client.post("/api/v1/runs", json=RUN, headers=headers)
    assert refused.status_code == 403 and refused.json()["detail"] == LOCAL_ONLY


def test_a_proxy_header_naming_this_machine_is_accepted(make_app) -> None:
    headers = {"X-Forwarded-For": "127.0.0.1", "Forwarded": 'for="[::1]:3000"'}
    with client_at(make_app(ReportingExecutor(UNSANDBOXED)), LOOPBACK) as client:
        assert client.post("/api/v1/runs", json=RUN, headers=headers).status_code == 201


def test_with_the_sandbox_any_machine_may_start_runs(make_app) -> None:
    executor = ReportingExecutor(SANDBOXED)
    with client_at(make_app(executor), ELSEWHERE) as client:
        assert client.post("/api/v1/runs", json=RUN).status_code == 201
        assert client.post(CELL, data=FORM, headers=PAGE).status_code == 201
        page = client.get(CHAPTER).text
    assert "trusted-local" not in page and "Trusted local mode" not in page


def test_a_fleet_with_one_unsandboxed_worker_is_in_trusted_local_mode(make_app) -> None:
    executor = FleetExecutor(SANDBOXED, UNSANDBOXED)
    with client_at(make_app(executor), ELSEWHERE) as client:
        assert client.post("/api/v1/runs", json=RUN).status_code == 403
        assert "worker cpu-1: evaluation children are NOT sandboxed" in client.get("/").text
    assert executor.snapshots == 1  # one answer of the registry served both requests


def test_a_fleet_of_sandboxed_workers_takes_runs_from_anywhere(make_app) -> None:
    with client_at(make_app(FleetExecutor(SANDBOXED, None)), ELSEWHERE) as client:
        assert client.post("/api/v1/runs", json=RUN).status_code == 201
        assert "trusted-local" not in client.get("/").text


# ---------------------------------------------------------------- what the pages say


def test_every_page_shows_the_note_with_its_reason(make_app) -> None:
    with client_at(make_app(ReportingExecutor(UNSANDBOXED)), ELSEWHERE) as client:
        pages = [client.get(url) for url in ("/", CHAPTER, "/book/p9/nothing-here")]
    for page in pages:
        assert 'class="trusted-local"' in page.text
        assert "Trusted local mode." in page.text
        assert "bubblewrap (bwrap) is not installed" in page.text


def test_no_note_without_a_sandbox_status(client: TestClient) -> None:
    # The fake executor reports none: no claim either way, no note.
    assert "trusted-local" not in client.get(CHAPTER).text


# ---------------------------------------------------------------- what the start says


def test_the_start_says_so_in_the_log_and_to_whoever_started_it(make_app, caplog) -> None:
    lines: list[str] = []
    caplog.set_level(logging.INFO, logger="kplay.app.main")
    with client_at(make_app(ReportingExecutor(UNSANDBOXED), announce=lines.append), LOOPBACK):
        pass
    assert len(lines) == 1 and lines[0].startswith("TRUSTED LOCAL MODE: ")
    assert "accepted only from this machine" in lines[0]
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warned] == lines


def test_the_start_with_the_sandbox_names_it(make_app) -> None:
    lines: list[str] = []
    with client_at(make_app(ReportingExecutor(SANDBOXED), announce=lines.append), LOOPBACK):
        pass
    assert lines == [SANDBOXED.summary()]


def test_kplay_serve_prints_the_mode(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    import uvicorn

    monkeypatch.setattr(app_main, "make_executor", lambda s: ReportingExecutor(UNSANDBOXED))

    def run(app: FastAPI, **kw: Any) -> None:  # starts and stops the app as uvicorn would
        with TestClient(app):
            pass

    monkeypatch.setattr(uvicorn, "run", run)
    app_main.serve(make_settings())
    out = capsys.readouterr().out
    assert "kplay: TRUSTED LOCAL MODE: evaluation children are NOT sandboxed" in out


# ---------------------------------------------------------------- addresses


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.255.0.3", True),
        ("::1", True),
        ("[::1]:8000", True),
        ("127.0.0.1:8000", True),
        ("::ffff:127.0.0.1", True),
        ("10.0.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("2001:db8::1", False),
        ("localhost", False),  # a name proves nothing
        ("testclient", False),
        ("", False),
        (None, False),
    ],
)
def test_loopback_addresses(address: str | None, loopback: bool) -> None:
    assert is_loopback(address) is loopback


def test_an_executor_without_a_status_is_not_in_trusted_local_mode() -> None:
    assert LocalMode(FakeExecutor()).reason() is None
    assert LocalMode(ReportingExecutor(UNSANDBOXED)).active
    assert not LocalMode(ReportingExecutor(SANDBOXED)).active
