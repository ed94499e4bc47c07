"""The Profile button: a profile run of a passed GPU run, its panel in the card (speed of
light, memory, stalls in words, the learner's lines as buttons to the editor), its report
kept apart from the result and downloadable by its owner only, and the refusals.

The profile a job brings back is read from pages a real H200 report printed
(tests/kernels/data/ncu), so the panel shows what ncu said of the warptiled SGEMM."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import inspect, text

from kplay.app.db.migrate import upgrade
from kplay.app.db.session import Database
from kplay.app.main import create_app
from kplay.config import Settings
from kplay.kernels.models import RunJob, RunResult
from kplay.kernels.ncuprofile import read_profile
from kplay.kernels.ncurun import profile_stage
from tests.app.fakes import FakeExecutor, correct_result, wrong_result

PAGES = Path(__file__).parents[1] / "kernels" / "data" / "ncu"
REPORT = b"NVIDIA Nsight Compute report bytes \x00\x01\x02" * 1000
SOURCE = "\n".join(f"// line {i}" for i in range(1, 300)) + "\n"
PAGE = {"HX-Request": "true"}


def profiled(job: RunJob) -> RunResult:
    if job.mode != "profile":
        return correct_result(job)
    pages = [(PAGES / f"sgemm_warptile_{n}.csv").read_text() for n in ("details", "raw", "source")]
    stage = profile_stage(read_profile(*pages), job.source)
    stage.report_bytes = len(REPORT)
    stage.report_b64 = base64.b64encode(REPORT).decode()
    stage.seconds = 12.5
    return correct_result(job).model_copy(
        update={"timing": None, "roofline": None, "profile": stage, "message": "profiled"}
    )


def submit(client: TestClient, backend: str = "cuda", problem: str = "vector_add") -> str:
    reply = client.post(
        "/api/v1/runs", json={"problem": problem, "backend": backend, "source": SOURCE}
    )
    assert reply.status_code == 201, reply.text
    return str(reply.json()["id"])


@pytest.fixture
def profiling_client(make_settings: Callable[..., Settings]) -> TestClient:
    return TestClient(create_app(make_settings(), FakeExecutor(profiled)))


def test_a_passed_run_is_profiled_and_its_card_shows_the_panel(
    profiling_client: TestClient,
) -> None:
    with profiling_client as client:
        run_id = submit(client)
        card = client.get(f"/runs/{run_id}/card").text
        assert f'data-profile-run="{run_id}"' in card and "Profile with Nsight Compute" in card
        reply = client.post(f"/runs/{run_id}/profile", headers=PAGE)
        assert reply.status_code == 201, reply.text
        profile_id = re.search(r'data-run-id="([0-9a-f]{32})"', reply.text).group(1)  # type: ignore[union-attr]
        assert profile_id != run_id
        for html in (reply.text, client.get(f"/runs/{run_id}/card").text):
            assert "Profiled under Nsight Compute" in html
            assert 'data-goto-line="289"' in html  # the fmaf line, first by stall samples
            assert re.search(r'<meter [^>]*value="79.7"', html)  # compute (SM) throughput
            assert "waiting at __syncthreads() for the rest of the block" in html
            assert f"/api/v1/runs/{profile_id}/profile.ncu-rep" in html
        body = client.get(f"/api/v1/runs/{profile_id}").json()
        assert body["result"]["profile"]["report_bytes"] == len(REPORT)
        assert body["result"]["profile"]["report_b64"] is None  # kept apart, not in the JSON
        assert body["result"]["profile"]["lines"][0]["line"] == 289
        report = client.get(f"/api/v1/runs/{profile_id}/profile.ncu-rep")
        assert report.status_code == 200 and report.content == REPORT
        assert "attachment" in report.headers["content-disposition"]
        # Only the profile run has a report.
        assert client.get(f"/api/v1/runs/{run_id}/profile.ncu-rep").status_code == 404
        client.cookies.clear()  # another reader sees neither the run nor its report
        assert client.get(f"/api/v1/runs/{profile_id}/profile.ncu-rep").status_code == 404
        assert client.post(f"/api/v1/runs/{run_id}/profile").status_code == 404


def test_what_cannot_be_profiled_is_refused_in_words(
    make_settings: Callable[..., Settings],
) -> None:
    def script(job: RunJob) -> RunResult:
        return wrong_result(job) if "WRONG" in job.source else profiled(job)

    with TestClient(create_app(make_settings(), FakeExecutor(script))) as client:
        cpu = submit(client, backend="numba-cpu")
        reply = client.post(f"/api/v1/runs/{cpu}/profile")
        assert reply.status_code == 422 and "GPU kernels" in reply.json()["detail"]
        wrong = client.post(
            "/api/v1/runs",
            json={"problem": "vector_add", "backend": "cuda", "source": SOURCE + "// WRONG\n"},
        ).json()["id"]
        reply = client.post(f"/api/v1/runs/{wrong}/profile")
        assert reply.status_code == 409 and "passed its checks" in reply.json()["detail"]
        assert "Profile with Nsight Compute" not in client.get(f"/runs/{wrong}/card").text
        done = submit(client)
        profile = client.post(f"/api/v1/runs/{done}/profile").json()["id"]
        reply = client.post(f"/api/v1/runs/{profile}/profile")
        assert reply.status_code == 422 and "is a profile" in reply.json()["detail"]
        assert client.post(f"/api/v1/runs/{'f' * 32}/profile").status_code == 404


def test_a_server_that_cannot_profile_ends_the_run_with_its_reason(
    make_settings: Callable[..., Settings],
) -> None:
    executor = FakeExecutor()
    with TestClient(create_app(make_settings(), executor)) as client:
        run_id = submit(client)
        executor.refuse = "cannot profile here: this server has no GPU"
        profile = client.post(f"/api/v1/runs/{run_id}/profile").json()
        body = client.get(f"/api/v1/runs/{profile['id']}").json()
        assert body["state"] == "rejected" and "no GPU" in body["detail"]


def test_the_migration_adds_profiles_to_existing_runs(database_url: str) -> None:
    db = Database(database_url)
    upgrade(db.engine, "0003_share_tokens")
    with db.engine.begin() as conn:
        conn.execute(
            text(
                'INSERT INTO runs (id, created_at, updated_at, "user", problem, backend, '
                "source, state) VALUES ('" + "c" * 32 + "', :t, :t, 'u', 'vector_add', "
                "'cuda', 'x', 'done')"
            ),
            {"t": "2026-12-04 12:00:00"},
        )
    upgrade(db.engine)
    upgrade(db.engine)
    columns = {c["name"] for c in inspect(db.engine).get_columns("runs")}
    assert "profile_of" in columns
    assert {c["name"] for c in inspect(db.engine).get_columns("profile_reports")} == {
        "run_id",
        "created_at",
        "data",
    }
    with db.engine.connect() as conn:
        assert conn.execute(text("SELECT profile_of FROM runs")).scalar_one() is None
    db.dispose()
