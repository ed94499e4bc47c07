"""A "predict, then run" cell through the generic run endpoints: refused until the reader has
recorded a prediction, and then the run takes that prediction (locked from then on)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient

from kplay.app.main import create_app
from kplay.config import Settings
from tests.app.fakes import FakeExecutor

PREDICT = "ch03-triad-predict"
PAGE = {"HX-Request": "true"}
TRIAD = "import numba\n\n@numba.njit\ndef triad(a, b, c, s, n):\n    pass\n"
BODY = {"problem": "cpu_triad", "backend": "numba-cpu", "source": TRIAD, "cell": PREDICT}


@pytest.fixture
def fake() -> FakeExecutor:
    return FakeExecutor()


@pytest.fixture
def predict_client(
    make_settings: Callable[..., Settings], fake: FakeExecutor
) -> Iterator[TestClient]:
    with TestClient(create_app(make_settings(), fake)) as client:
        yield client


def test_the_api_refuses_a_run_of_a_predict_cell_without_a_prediction(
    predict_client: TestClient, fake: FakeExecutor
) -> None:
    reply = predict_client.post("/api/v1/runs", json=BODY)
    assert reply.status_code == 409, reply.text
    detail = reply.json()["detail"]
    assert "predict-then-run" in detail and "record your prediction before you run" in detail
    assert f"/api/v1/cells/{PREDICT}/predictions" in detail
    # Nothing was stored and nothing reached the executor.
    assert fake.jobs == []
    assert predict_client.get(f"/api/v1/cells/{PREDICT}/runs").json() == []


def test_the_page_run_button_of_the_plain_kind_is_refused_too(
    predict_client: TestClient, fake: FakeExecutor
) -> None:
    form = {"backend": "numba-cpu", "source": TRIAD}
    reply = predict_client.post(f"/cells/{PREDICT}/runs", data=form, headers=PAGE)
    assert reply.status_code == 409
    assert "record your prediction before you run" in reply.text
    assert fake.jobs == []


def test_a_recorded_prediction_lets_the_api_run_and_is_locked_by_it(
    predict_client: TestClient, fake: FakeExecutor
) -> None:
    made = predict_client.post(f"/api/v1/cells/{PREDICT}/predictions", json={"value": "35"})
    assert made.status_code == 201, made.text
    pid = made.json()["prediction"]

    run = predict_client.post("/api/v1/runs", json=BODY)
    assert run.status_code == 201, run.text
    assert [job.cell for job in fake.jobs] == [PREDICT]
    read = predict_client.get(f"/api/v1/predictions/{pid}").json()
    assert read["locked"] is True and read["run"] == run.json()["id"]
    assert predict_client.put(f"/api/v1/predictions/{pid}", json={"value": "1"}).status_code == 409

    # The prediction went with that run: the next one needs a new prediction.
    again = predict_client.post("/api/v1/runs", json=BODY)
    assert again.status_code == 409 and "record your prediction" in again.json()["detail"]
    assert len(fake.jobs) == 1


def test_cells_of_other_kinds_and_catalog_runs_still_run_without_a_prediction(
    predict_client: TestClient, fake: FakeExecutor
) -> None:
    plain = {**BODY, "cell": None}
    assert predict_client.post("/api/v1/runs", json=plain).status_code == 201
    fix = {
        "problem": "gemm_smem_tiling",
        "backend": "cuda",
        "source": "__global__ void k() {}\n",
        "cell": "p2-smem-tiling-fix",
    }
    assert predict_client.post("/api/v1/runs", json=fix).status_code == 201
    assert len(fake.jobs) == 2
