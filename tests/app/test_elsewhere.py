"""A run only compiled offers the same exercise in a backend that can check it here."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from kplay.app.main import create_app
from kplay.app.services.elsewhere import check_elsewhere
from kplay.config import Settings
from kplay.kernels.catalog import get_problem
from tests.app.test_real_executor import wait_final


def test_only_backends_some_device_can_run_or_simulate_are_offered_best_first() -> None:
    devices = [
        {"backends": {"cuda": "compile-only", "numba-cuda": "simulate", "triton": "unknown"}},
        {"backends": {"numba-cpu": "run", "triton": "simulate"}},
    ]
    offered = check_elsewhere("cuda", ["cuda", "numba-cuda", "triton", "numba-cpu"], devices)
    assert [(e.key, e.how) for e in offered] == [
        ("numba-cpu", "runs here"),
        ("numba-cuda", "checked here in a simulator (slow, no timing)"),
        ("triton", "checked here in a simulator (slow, no timing)"),
    ]
    assert check_elsewhere("cuda", ["cuda"], devices) == []
    assert check_elsewhere("cuda", ["cuda", "numba-cuda"], []) == []


@pytest.mark.slow
def test_a_cuda_run_without_a_gpu_offers_the_simulator_on_its_card(tmp_path: Path) -> None:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'kplay.sqlite3'}", pool_size=1, job_timeout_s=120
    )
    source = get_problem("vector_add").starter("cuda")
    with TestClient(create_app(settings), client=("127.0.0.1", 50000)) as client:
        if client.get("/api/v1/devices").json()[0].get("gpus"):
            pytest.skip("this machine has a GPU: a CUDA run is checked, not only compiled")
        posted = client.post(
            "/cells/ch02-vadd-gpu/runs",
            data={"backend": "cuda", "source": source},
            headers={"HX-Request": "true"},
        )
        assert posted.status_code == 201, posted.text
        run_id = posted.text.split('data-run-id="')[1].split('"')[0]
        run = wait_final(client, run_id)
        assert run["state"] == "compiled", run["detail"]
        card = client.get(f"/runs/{run_id}/card").text
        assert "Verified: the kernel compiles. Not verified: its output and its time." in card
        offer = 'href="/problems/vector_add?backend=numba-cuda" data-switch-backend="numba-cuda"'
        assert offer in card
        how = 'Numba CUDA</a> <span class="run-elsewhere-how">checked here in a simulator'
        assert how in card
