"""Picking a GPU model: offered only when several are up, and the pick reaches the job."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from kplay.app.main import create_app
from kplay.app.services.gpu_picker import gpu_models
from kplay.config import Settings
from tests.app.fakes import FakeExecutor

H200 = {"device": "NVIDIA H200", "queues": ["gpu.any", "gpu.sm90", "gpu.h200"]}
A100 = {"device": "NVIDIA A100-SXM4-80GB", "queues": ["gpu.any", "gpu.sm80", "gpu.a100-sxm4-80gb"]}
CPU = {"device": "AMD EPYC", "queues": ["cpu"]}


class Fleet(FakeExecutor):
    def __init__(self, workers: list[dict[str, Any]]) -> None:
        super().__init__()
        self.workers = workers

    def devices(self) -> list[dict[str, Any]]:
        return self.workers


def test_gpu_models_come_from_the_queues_live_workers_serve() -> None:
    models = gpu_models([H200, dict(H200), A100, CPU])
    assert models == [("a100-sxm4-80gb", "NVIDIA A100-SXM4-80GB"), ("h200", "NVIDIA H200")]


def test_the_picker_appears_with_two_models_and_the_pick_reaches_the_job(
    make_settings: Callable[..., Settings],
) -> None:
    fleet = Fleet([H200, A100, CPU])
    with TestClient(create_app(make_settings(), fleet)) as client:
        page = client.get("/book/p1/first-gpu-kernel").text
        assert '<select name="device">' in page and '<option value="h200">' in page
        cell = page.split('data-cell="', 1)[1].split('"', 1)[0]
        form = {"backend": "cuda", "source": 'extern "C" __global__ void k() {}', "device": "h200"}
        response = client.post(f"/cells/{cell}/runs", data=form, headers={"HX-Request": "true"})
        assert response.status_code == 201, response.text
    assert fleet.jobs[-1].device == "h200"


def test_no_picker_with_a_single_model(make_settings: Callable[..., Settings]) -> None:
    with TestClient(create_app(make_settings(), Fleet([H200, CPU]))) as client:
        assert 'name="device"' not in client.get("/book/p1/first-gpu-kernel").text
