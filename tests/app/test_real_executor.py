"""Through the real LocalExecutor: a numba-cpu vector_add run, compiled, checked and timed in a
child process, recorded by the app and shown on the card."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from kplay.app.main import create_app
from kplay.config import Settings

GOOD = """import numba


@numba.njit(fastmath=True)
def vector_add(a, b, out, n):
    for i in range(n):
        out[i] = a[i] + b[i]
"""
BROKEN = GOOD.replace("out[i] = a[i] + b[i]", "out[i] = a[i] + b[i] +")


def wait_final(client: TestClient, run_id: str, limit_s: float = 240.0) -> dict:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        run = client.get(f"/api/v1/runs/{run_id}").json()
        if run["finished_at"] is not None:
            return run  # type: ignore[no-any-return]
        time.sleep(0.2)
    pytest.fail(f"run {run_id} did not finish in {limit_s} s")


@pytest.mark.slow
def test_numba_cpu_run_through_the_local_executor(tmp_path: Path) -> None:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'kplay.sqlite3'}", pool_size=1, job_timeout_s=120
    )
    # From this machine: where the sandbox cannot be had, only local runs are taken.
    with TestClient(create_app(settings), client=("127.0.0.1", 50000)) as client:
        devices = client.get("/api/v1/devices").json()
        assert devices and devices[0]["executor"] == "local"
        posted = client.post(
            "/cells/ch01-vadd-cpu/runs",
            data={"backend": "numba-cpu", "source": GOOD},
            headers={"HX-Request": "true"},
        )
        assert posted.status_code == 201
        run_id = posted.text.split('data-run-id="')[1].split('"')[0]
        run = wait_final(client, run_id)
        assert run["state"] == "done", run["detail"]
        result = run["result"]
        assert result["check"]["ok"] and result["timing"]["timed"]
        assert result["timing"]["median_us"] > 0 and result["roofline"]["percent_of_roofline"] > 0
        card = client.get(f"/runs/{run_id}/card").text
        assert "Correct" in card and "roofline-data" in card and "hx-trigger" not in card

        broken = client.post(
            "/api/v1/runs",
            json={
                "problem": "vector_add",
                "backend": "numba-cpu",
                "source": BROKEN,
                "cell": "ch01-vadd-cpu",
            },
        ).json()
        run = wait_final(client, broken["id"])
        assert run["state"] == "compile_error"
        lines = [d["line"] for d in run["result"]["compile"]["diagnostics"]]
        assert 7 in lines


def _correct_solution(problem: str, suffix: str) -> str:
    folder = Path(__file__).resolve().parents[2] / "kernels" / "problems" / problem
    return next(
        p for p in sorted((folder / "solutions" / "correct").iterdir()) if p.name.endswith(suffix)
    ).read_text()


@pytest.mark.gpu
@pytest.mark.parametrize(("backend", "suffix"), [("cuda", ".cu"), ("numba-cuda", ".numba_cuda.py")])
def test_gpu_run_is_timed_and_shown(tmp_path: Path, backend: str, suffix: str) -> None:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'kplay.sqlite3'}", pool_size=1, job_timeout_s=240
    )
    source = _correct_solution("vector_add", suffix)
    # From this machine: where the sandbox cannot be had, only local runs are taken.
    with TestClient(create_app(settings), client=("127.0.0.1", 50000)) as client:
        created = client.post(
            "/api/v1/runs",
            json={
                "problem": "vector_add",
                "backend": backend,
                "source": source,
                "cell": "ch02-vadd-gpu",
            },
        )
        assert created.status_code == 201, created.text
        run = wait_final(client, created.json()["id"], limit_s=400)
        assert run["state"] == "done", run["detail"]
        result = run["result"]
        assert result["system"]["kind"] == "gpu" and result["timing"]["timed"]
        assert result["roofline"]["bound"] == "memory"
        card = client.get(f"/runs/{run['id']}/card").text
    assert "Correct" in card and "Untimed" not in card and "roofline-data" in card
    if backend == "cuda":
        assert "registers" in card and ("SASS (" in card or "PTX (" in card)
