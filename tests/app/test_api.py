"""The JSON API under /api/v1: create, read, list, catalog, devices, and refusals."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from kplay.app.readers import COOKIE
from kplay.kernels.models import RunState
from tests.app.fakes import FakeExecutor

GOOD = {
    "problem": "vector_add",
    "backend": "numba-cpu",
    "source": "import numba\n\n@numba.njit\ndef vector_add(a, b, out, n):\n    pass\n",
}


def test_create_then_get(client: TestClient, executor: FakeExecutor) -> None:
    created = client.post("/api/v1/runs", json={**GOOD, "cell": "ch01-vadd-cpu"})
    assert created.status_code == 201
    body = created.json()
    assert body["state"] == "done" and body["url"] == f"/api/v1/runs/{body['id']}"
    assert executor.jobs[0].job_id == body["id"]
    # The run is the new session's, and the session's cookie came back with the answer.
    assert executor.jobs[0].user.startswith("anonymous-") and COOKIE in client.cookies
    run = client.get(body["url"]).json()
    assert run["state"] == "done" and run["source"] == GOOD["source"]
    assert run["cell"] == "ch01-vadd-cpu" and run["chapter"] == "first-kernel-cpu"
    assert run["result"]["timing"]["median_us"] == 100.0
    assert run["median_us"] == 100.0 and run["finished_at"] is not None


@pytest.mark.parametrize("executor", [FakeExecutor(hold=True)])
def test_in_flight_run_reports_position(client: TestClient, executor: FakeExecutor) -> None:
    first = client.post("/api/v1/runs", json=GOOD).json()
    second = client.post("/api/v1/runs", json=GOOD).json()
    assert first["state"] == "queued" and second["queue_position"] == 1
    executor.progress(first["id"], RunState.compiling, "compiling with numba")
    run = client.get(f"/api/v1/runs/{first['id']}").json()
    assert run["state"] == "compiling" and run["detail"] == "compiling with numba"
    assert run["queue_position"] == 0 and run["started_at"] is not None
    executor.release(first["id"])
    assert client.get(f"/api/v1/runs/{first['id']}").json()["queue_position"] is None


def test_cell_history_newest_first(client: TestClient) -> None:
    ids = [
        client.post("/api/v1/runs", json={**GOOD, "cell": "ch01-vadd-cpu"}).json()["id"]
        for _ in range(3)
    ]
    client.post("/api/v1/runs", json=GOOD)  # not in a cell
    listed = client.get("/api/v1/cells/ch01-vadd-cpu/runs").json()
    assert [r["id"] for r in listed] == ids[::-1]
    assert all("source" not in r for r in listed)


def test_unknown_cell_history_is_404(client: TestClient) -> None:
    reply = client.get("/api/v1/cells/nope/runs")
    assert reply.status_code == 404 and "nope" in reply.json()["detail"]


def test_unknown_run_is_404(client: TestClient) -> None:
    reply = client.get("/api/v1/runs/0123456789abcdef")
    assert reply.status_code == 404 and "0123456789abcdef" in reply.json()["detail"]


def test_problems_list_and_detail(client: TestClient) -> None:
    listed = client.get("/api/v1/problems").json()
    assert "vector_add" in [p["slug"] for p in listed]
    spec = client.get("/api/v1/problems/vector_add").json()
    assert spec["slug"] == "vector_add" and set(spec["starters"]) == set(spec["backends"])
    assert "TODO" in spec["starters"]["numba-cpu"]
    assert "/work/" not in str(spec) and "folder" not in spec
    missing = client.get("/api/v1/problems/nope")
    assert missing.status_code == 404 and "nope" in missing.json()["detail"]


def test_openapi_documents_the_api(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    for path in (
        "/api/v1/runs",
        "/api/v1/runs/{run_id}",
        "/api/v1/cells/{cell_id}/runs",
        "/api/v1/problems",
        "/api/v1/problems/{slug}",
        "/api/v1/devices",
    ):
        assert path in schema["paths"]
    assert not any(p.startswith("/book") for p in schema["paths"])
    errors = schema["paths"]["/api/v1/runs"]["post"]["responses"]
    assert errors["413"]["content"]["application/json"]["schema"]["$ref"].endswith("ErrorOut")


def test_each_endpoint_documents_only_the_errors_it_can_answer(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]

    def codes(path: str, method: str = "get") -> set[str]:
        return set(paths[path][method]["responses"])

    assert {"400", "413", "422", "403", "429"} <= codes("/api/v1/runs", "post")
    assert codes("/api/v1/problems") == {"200"}
    assert codes("/api/v1/devices") == {"200"}
    for path in (
        "/api/v1/runs/{run_id}",
        "/api/v1/problems/{slug}",
        "/api/v1/cells/{cell_id}/runs",
    ):
        assert "404" in codes(path)
        assert not {"400", "413", "403", "429"} & codes(path), path


def test_reference_page_lists_every_endpoint_without_a_cdn(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200
    schema = client.get("/openapi.json").json()
    for path, ops in schema["paths"].items():
        for method in ops:
            assert f"{method.upper()}</span> <code>{path}</code>" in page.text
    assert "cdn" not in page.text.lower() and "swagger" not in page.text.lower()
    assert '<code>source</code> <span class="req">required</span>' in page.text


@pytest.mark.parametrize(
    ("change", "status", "fragment"),
    [
        (
            {"problem": "vector_addd"},
            422,
            "unknown problem 'vector_addd'; did you mean 'vector_add'?",
        ),
        ({"backend": "fortran"}, 422, "backend 'fortran' is not offered"),
        ({"cell": "nope"}, 422, "unknown cell 'nope'"),
        ({"cell": "ch02-vadd-gpu"}, 422, "backend 'numba-cpu' is not offered by cell"),
        ({"cell": "ch01-saxpy-cpu"}, 422, "is for problem 'saxpy'"),
        ({"source": "   \n"}, 422, "source is empty"),
        ({"source": "x" * 70000}, 413, "the limit is 65536 bytes"),
        ({"launch": {"grid": ["ceil_div(n,"]}}, 422, "cannot parse formula"),
        ({"launch": {"grid": ["ceil_div(m, 256)"]}}, 422, "unknown name 'm'"),
        ({"launch": {"grid": ["1", "1", "1", "1"]}}, 422, "1 to 3 dimensions"),
        ({"launch": {"num_warps": 3}}, 422, "power of two"),
        ({"launch": {"grid": "not a list"}}, 422, "launch.grid"),
        ({"launch": {"colour": "red"}}, 422, "launch.colour"),
        ({"mode": "fast"}, 422, "mode"),
        ({"requires": "hopper"}, 422, "requires"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(
    client: TestClient, executor: FakeExecutor, change: dict, status: int, fragment: str
) -> None:
    reply = client.post("/api/v1/runs", json={**GOOD, **change})
    assert reply.status_code == status, reply.text
    detail = reply.json()["detail"]
    assert isinstance(detail, str) and fragment in detail
    assert executor.jobs == []


def test_malformed_json_is_a_400(client: TestClient) -> None:
    reply = client.post(
        "/api/v1/runs",
        content=b'{"problem": "vector_add",',
        headers={"content-type": "application/json"},
    )
    assert reply.status_code == 400
    assert reply.json()["detail"].startswith("malformed JSON")


def test_missing_field_is_named(client: TestClient) -> None:
    reply = client.post("/api/v1/runs", json={"problem": "vector_add", "source": "x"})
    assert reply.status_code == 422 and "backend" in reply.json()["detail"]


def test_valid_launch_override_is_stored(client: TestClient, executor: FakeExecutor) -> None:
    body = {**GOOD, "backend": "cuda", "launch": {"grid": ["ceil_div(n, 128)"], "block": ["128"]}}
    created = client.post("/api/v1/runs", json=body)
    assert created.status_code == 201, created.text
    run = client.get(created.json()["url"]).json()
    assert run["launch"]["block"] == ["128"]
    assert executor.jobs[0].launch is not None and executor.jobs[0].launch.grid == [
        "ceil_div(n, 128)"
    ]


@pytest.mark.parametrize("executor", [FakeExecutor(refuse="no worker serves cuda right now")])
def test_refused_submit_ends_rejected(client: TestClient) -> None:
    created = client.post("/api/v1/runs", json=GOOD)
    assert created.status_code == 201
    run = client.get(created.json()["url"]).json()
    assert run["state"] == "rejected" and run["detail"] == "no worker serves cuda right now"
    assert run["result"]["message"] == "no worker serves cuda right now"


def test_placement_reaches_the_job(client: TestClient, executor: FakeExecutor) -> None:
    body = {**GOOD, "backend": "cuda", "requires": "sm90", "device": "H200"}
    assert client.post("/api/v1/runs", json=body).status_code == 201
    assert executor.jobs[0].requires == "sm90" and executor.jobs[0].device == "H200"


def test_an_arch_specific_cell_waits_for_its_compute_capability(
    client: TestClient, executor: FakeExecutor
) -> None:
    """`arch=sm_90a` code runs on compute capability 9.0 only: the job asks for sm90."""
    source = "// kplay: arch=sm_90a block=128\n" + GOOD["source"]
    assert client.post("/api/v1/runs", json={**GOOD, "backend": "cuda", "source": source})
    assert executor.jobs[-1].requires == "sm90"
    plain = {**GOOD, "backend": "cuda", "source": "// kplay: arch=sm_90\n" + GOOD["source"]}
    assert client.post("/api/v1/runs", json=plain).status_code == 201
    assert executor.jobs[-1].requires is None
    named = {**GOOD, "backend": "cuda", "source": source, "requires": "sm100"}
    assert client.post("/api/v1/runs", json=named).status_code == 201
    assert executor.jobs[-1].requires == "sm100"  # the reader's own choice stands
