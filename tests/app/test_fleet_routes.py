"""/fleet and /api/v1/fleet, in the embedded mode and against a real fleet registry."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient

from kplay.app.executors import FleetAware, Reconciling
from kplay.app.main import create_app
from kplay.config import Settings
from kplay.workers.fleet_models import WorkerInfo
from tests.workers.celery_support import (  # noqa: F401 - fixtures
    Deployment,
    deployment_fixture,
    redis_base_fixture,
)


def test_the_embedded_fleet_is_the_local_executor(client: TestClient) -> None:
    body = client.get("/api/v1/fleet").json()
    assert body["mode"] == "embedded" and body["queues"] == [] and body["error"] is None
    [worker] = body["workers"]
    assert (worker["id"], worker["device"], worker["kind"]) == ("local", "Fake Device 9000", "cpu")
    assert worker["backends"] == {"numba-cpu": "run"}  # the executor's description, kept whole
    page = client.get("/fleet")
    assert page.status_code == 200
    assert "Fake Device 9000" in page.text and "embedded mode" in page.text
    assert 'hx-trigger="every 3s"' in page.text and "<html" in page.text


def test_the_page_polls_itself_with_only_its_block(client: TestClient) -> None:
    fragment = client.get("/fleet", headers={"HX-Request": "true"})
    assert fragment.status_code == 200
    assert fragment.text.lstrip().startswith('<section id="fleet"')
    assert "<html" not in fragment.text and "Fake Device 9000" in fragment.text


def test_the_api_is_documented(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert "/api/v1/fleet" in paths and "/fleet" not in paths


@pytest.fixture
def distributed_client(
    deployment: Deployment, make_settings: Callable[..., Settings]
) -> Iterator[TestClient]:
    from kplay.workers.celery_executor import CeleryExecutor

    executor = CeleryExecutor(deployment.url, config=deployment.config)  # the app starts it
    assert isinstance(executor, FleetAware) and isinstance(executor, Reconciling)
    deployment.executors.append(executor)
    settings = make_settings(broker_url=deployment.url, key_prefix=deployment.prefix)
    with TestClient(create_app(settings, executor)) as c:
        yield c


@pytest.mark.redis
def test_the_distributed_fleet_shows_workers_queues_and_waits(
    distributed_client: TestClient, deployment: Deployment
) -> None:
    from kplay.workers.fleet import Heartbeat
    from kplay.workers.jobstore import JobStore, connect

    store = JobStore(connect(deployment.url), deployment.prefix)
    info = WorkerInfo(
        id="gpu0@rack1",
        kind="gpu",
        device="NVIDIA H200",
        compute_capability="9.0",
        queues=["gpu.any", "gpu.sm90"],
    )
    Heartbeat(store, info).beat()
    for _ in range(3):
        store.r.lpush(deployment.config.celery_key_prefix + "gpu.sm90", "{}")
    store.r.lpush(store.keys.durations("gpu.sm90"), 2.0)

    body = distributed_client.get("/api/v1/fleet").json()
    assert body["mode"] == "distributed"
    assert [w["id"] for w in body["workers"]] == ["gpu0@rack1"]
    sm90 = next(q for q in body["queues"] if q["name"] == "gpu.sm90")
    assert (sm90["depth"], sm90["workers"], sm90["wait_estimate_s"]) == (3, 1, 6.0)

    page = distributed_client.get("/fleet").text
    assert "gpu0@rack1" in page and "NVIDIA H200" in page and "idle" in page
    assert "<code>gpu.sm90</code>" in page and "6.0 s" in page
