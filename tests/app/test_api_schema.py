"""Every /api/v1 operation, driven by its own OpenAPI description (schemathesis): whatever a
client sends that the schema allows, or nearly allows, the answer is never a server error.

The app runs in process with the fake executor, on a temporary SQLite database and, where a
server answers, on PostgreSQL too (which refuses some text SQLite stores: a NUL). The number
of examples per operation is bounded so that the whole file takes well under a minute.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import APIOperation, BaseSchema, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.python import asgi

from kplay.app.main import create_app
from kplay.config import Settings
from tests.app.conftest import TEST_SECRET_KEY
from tests.app.fakes import FakeExecutor

EXAMPLES = 40


@pytest.fixture
def api_app(database_url: str) -> Iterator[FastAPI]:
    settings = Settings(
        database_url=database_url,
        secret_key=TEST_SECRET_KEY,
        # Many examples start runs from one address: the limits are not what is tested here.
        run_rate_per_reader="100000/minute",
        run_rate_per_ip="100000/minute",
    )
    app = create_app(settings, FakeExecutor())
    yield app
    # schemathesis started the app's lifespan for its calls; end it with the test.
    asgi.shutdown_lifespans()


@pytest.fixture
def api_schema(api_app: FastAPI) -> BaseSchema:
    schema = schemathesis.openapi.from_asgi("/openapi.json", api_app)
    return schema.include(path_regex=r"^/api/v1/")


def _operations(schema: BaseSchema) -> list[APIOperation]:
    return [result.ok() for result in schema.get_all_operations()]


def test_the_schema_covers_the_api(api_schema: BaseSchema) -> None:
    paths = {op.path for op in _operations(api_schema)}
    assert {"/api/v1/runs", "/api/v1/runs/{run_id}", "/api/v1/problems"} <= paths


def _explore(operation: APIOperation, mode: GenerationMode) -> None:
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def examples(case: schemathesis.Case) -> None:
        case.call_and_validate(checks=[not_a_server_error])

    examples()


def _known_targets(app: FastAPI) -> list[dict[str, str | None]]:
    """(problem, backend, cell) triples the service accepts: every problem's backends, alone
    and in each of its cells."""
    services = app.state.services
    targets: list[dict[str, str | None]] = [
        {"problem": slug, "backend": backend, "cell": None}
        for slug, spec in services.catalog.items()
        for backend in spec.backends
    ]
    for chapter in services.book.chapters():
        for cell in chapter.cells:
            targets += [
                {"problem": cell.problem, "backend": backend, "cell": cell.id}
                for backend in cell.backends
            ]
    return targets


def test_runs_of_known_problems_with_any_launch_and_source(
    api_app: FastAPI, api_schema: BaseSchema
) -> None:
    """Generated bodies aim at unknown problems almost always; these aim at known ones, so the
    launch formulas, sources and device names reach the checks behind the problem's name."""
    create = api_schema["/api/v1/runs"]["POST"]
    targets = _known_targets(api_app)

    @given(case=create.as_strategy(), target=st.sampled_from(targets))
    @settings(
        max_examples=EXAMPLES * 3,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def examples(case: schemathesis.Case, target: dict[str, str | None]) -> None:
        case.body = {**case.body, **{k: v for k, v in target.items() if v is not None}}
        case.call_and_validate(checks=[not_a_server_error])

    examples()


def test_no_operation_answers_with_a_server_error(api_schema: BaseSchema) -> None:
    # (schemathesis's own parametrize over a fixture does not run under this pytest, so the
    # operations are walked here, each in both modes, and every failure is reported.)
    failures = []
    for operation in _operations(api_schema):
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                _explore(operation, mode)
            except Unsatisfiable:
                # Nothing in the schema to violate (a GET with one free string in its path).
                assert mode is GenerationMode.NEGATIVE, operation.label
            except Exception as exc:  # noqa: BLE001 - collected, then reported together
                failures.append(f"{operation.label} ({mode.value}): {exc}")
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize("url", ["/api/v1/runs/ab%00cd", "/runs/ab%00cd/card", "/api/v1/runs/x"])
def test_an_id_no_run_could_have_is_no_run(api_app: FastAPI, url: str) -> None:
    with TestClient(api_app) as client:
        assert client.get(url).status_code == 404


def test_a_nul_in_a_source_is_a_request_error(api_app: FastAPI) -> None:
    body = {"problem": "vector_add", "backend": "numba-cpu", "source": "x = 1\n\x00y = 2\n"}
    with TestClient(api_app) as client:
        reply = client.post("/api/v1/runs", json=body)
        assert reply.status_code == 422
        assert reply.json()["detail"].startswith("source contains a NUL character (line 2)")
        directive = {**body, "source": "x = 1\n# kplay: grid=(n\x00,)\n"}
        assert client.post("/api/v1/runs", json=directive).status_code == 422
