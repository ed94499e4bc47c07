"""Share and compare: a run's permanent read-only link, opened by another reader (another
session cookie) and forked into that reader's own cell; any two attempts of a cell compared.
The link's core is tested on SQLite and on PostgreSQL."""

from __future__ import annotations

import html as html_text
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import inspect, text

from kplay.app.db.migrate import upgrade
from kplay.app.db.session import Database
from kplay.app.main import create_app
from kplay.config import Settings
from kplay.kernels.models import RunJob, RunResult
from tests.app.conftest import TEST_SECRET_KEY
from tests.app.fakes import FakeExecutor, correct_result, wrong_result

CELL_ID = "ch01-vadd-cpu"
SOURCE = "import numba\n\n@numba.njit\ndef vector_add(a, b, out, n):\n    pass\n"
PAGE = {"HX-Request": "true"}


def run_in_cell(
    client: TestClient, source: str = SOURCE, cell: str = CELL_ID, **launch: str
) -> str:
    data = {"backend": "numba-cpu", "source": source, **launch}
    reply = client.post(f"/cells/{cell}/runs", data=data, headers=PAGE)
    assert reply.status_code == 201, reply.text
    found = re.search(r'data-run-id="([0-9a-f]{32})"', reply.text)
    assert found is not None
    return found.group(1)


def share(client: TestClient, run_id: str) -> str:
    reply = client.post(f"/api/v1/runs/{run_id}/share")
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["url"] == f"/shared/{body['token']}"
    assert body["api_url"] == f"/api/v1/shared/{body['token']}"
    return str(body["token"])


def roofline_points(html: str) -> list[dict]:
    found = re.search(r'<script type="application/json" class="roofline-data">(.*?)</script>', html)
    assert found is not None, "no chart"
    return list(json.loads(found.group(1))["points"])


@contextmanager
def two_readers(app: FastAPI) -> Iterator[tuple[TestClient, TestClient]]:
    """The owner and another reader: one app, two cookie jars."""
    with TestClient(app) as owner:
        yield owner, TestClient(app)


# ---------------------------------------------------------------- the bar: open and fork


def test_a_shared_run_opens_for_another_reader_and_its_fork_runs(database_url: str) -> None:
    settings = Settings(database_url=database_url, secret_key=TEST_SECRET_KEY)
    with two_readers(create_app(settings, FakeExecutor())) as (owner, other):
        run_id = run_in_cell(owner, block="128")
        mine = owner.get(f"/api/v1/runs/{run_id}").json()
        token = share(owner, run_id)

        page = other.get(f"/shared/{token}")
        assert page.status_code == 200
        assert other.cookies.get("kplay_session") != owner.cookies.get("kplay_session")
        html = page.text
        assert "Correct" in html and "100 µs" in html and "Vector addition" in html
        assert '<span class="nf">vector_add</span>' in html  # the source, highlighted
        assert "<dt>block</dt><dd>128</dd>" in html
        assert [p["current"] for p in roofline_points(html)] == [True]
        # Read-only: no editor, no Run, no Share.
        for owner_only in ("data-run-form", "data-share-run", "data-editor", "data-load-run"):
            assert owner_only not in html

        shared = other.get(f"/api/v1/shared/{token}").json()
        for field in ("source", "launch", "state", "median_us", "percent_of_roofline", "result"):
            assert shared[field] == mine[field], field
        assert shared["verdict"] == "Correct" and "user" not in shared
        assert shared["launch_fields"] == {"block": "128"}
        # Sharing opens the link, not the run's id: that stays its owner's.
        assert other.get(f"/api/v1/runs/{run_id}").status_code == 404

        # Fork: the cell's page, told which shared run to load; Run there is the reader's.
        fork_url = shared["fork_url"]
        assert fork_url == f"/book/p1/first-kernel-cpu?fork={token}#cell-{CELL_ID}"
        chapter = other.get(fork_url.split("#")[0])
        assert chapter.status_code == 200 and f'id="cell-{CELL_ID}"' in chapter.text
        fork_id = run_in_cell(other, shared["source"], **shared["launch_fields"])
        forked = other.get(f"/api/v1/runs/{fork_id}").json()
        assert forked["state"] == "done" and forked["finished_at"] is not None
        assert forked["source"] == mine["source"] and forked["launch"] == mine["launch"]
        assert forked["user"] != mine["user"]
        assert [r["id"] for r in other.get(f"/api/v1/cells/{CELL_ID}/runs").json()] == [fork_id]
        assert [r["id"] for r in owner.get(f"/api/v1/cells/{CELL_ID}/runs").json()] == [run_id]
        assert owner.get(f"/api/v1/runs/{fork_id}").status_code == 404


def test_the_migration_adds_the_token_to_existing_runs(database_url: str) -> None:
    db = Database(database_url)
    upgrade(db.engine, "0002_search")
    with db.engine.begin() as conn:
        conn.execute(
            text(
                'INSERT INTO runs (id, created_at, updated_at, "user", problem, backend, '
                "source, state) VALUES ('" + "b" * 32 + "', :t, :t, 'u', 'vector_add', "
                "'numba-cpu', 'x', 'done')"
            ),
            {"t": "2024-08-01 12:00:00"},
        )
    upgrade(db.engine)
    upgrade(db.engine)
    columns = {c["name"] for c in inspect(db.engine).get_columns("runs")}
    indexes = {i["name"]: i for i in inspect(db.engine).get_indexes("runs")}
    assert "share_token" in columns and indexes["ix_runs_share_token"]["unique"]
    with db.engine.connect() as conn:
        assert conn.execute(text("SELECT share_token FROM runs")).scalar_one() is None
    db.dispose()


def test_an_unknown_link_is_a_404_with_words(database_url: str) -> None:
    settings = Settings(database_url=database_url, secret_key=TEST_SECRET_KEY)
    with TestClient(create_app(settings, FakeExecutor())) as client:
        for token in ("A" * 32, "short", "ab%00cd" + "x" * 27):
            page = client.get(f"/shared/{token}")
            assert page.status_code == 404 and "There is no shared run at this link" in page.text
            assert "Not found" in page.text
            api = client.get(f"/api/v1/shared/{token}")
            assert api.status_code == 404 and "no shared run" in api.json()["detail"]


# ---------------------------------------------------------------- refusals


def test_sharing_is_the_owners_alone(client: TestClient) -> None:
    run_id = run_in_cell(client)
    other = TestClient(client.app)
    api = other.post(f"/api/v1/runs/{run_id}/share")
    assert api.status_code == 404
    assert api.json()["detail"].endswith("only the reader who started a run can share it")
    box = other.post(f"/runs/{run_id}/share", headers=PAGE)
    assert box.status_code == 404 and "only the reader who started a run" in box.text
    assert "data-share-error" in box.text
    assert client.post(f"/api/v1/runs/{'0' * 32}/share").status_code == 404
    assert client.post("/api/v1/runs/not-an-id/share").status_code == 404
    # Nothing was minted by the refusals: the owner's first share is the first token.
    token = share(client, run_id)
    assert share(client, run_id) == token  # the same link each time
    assert re.fullmatch(r"[A-Za-z0-9_-]{32}", token)
    assert share(client, run_in_cell(client)) != token


@pytest.mark.parametrize("executor", [FakeExecutor(hold=True)])
def test_a_run_in_flight_is_shared_once_it_ends(client: TestClient, executor: FakeExecutor) -> None:
    run_id = run_in_cell(client)
    refused = client.post(f"/api/v1/runs/{run_id}/share")
    assert refused.status_code == 409 and "has not finished yet" in refused.json()["detail"]
    live = client.get(f"/runs/{run_id}/card").text
    assert "data-share-run" not in live  # the button comes with the verdict
    executor.release(run_id)
    assert "data-share-run" in client.get(f"/runs/{run_id}/card").text
    share(client, run_id)


def test_share_is_refused_from_another_site(client: TestClient) -> None:
    run_id = run_in_cell(client)
    assert client.post(f"/runs/{run_id}/share").status_code == 403  # no HX-Request
    cross = {**PAGE, "Sec-Fetch-Site": "cross-site"}
    assert client.post(f"/runs/{run_id}/share", headers=cross).status_code == 403
    api = client.post(f"/api/v1/runs/{run_id}/share", headers={"Sec-Fetch-Site": "cross-site"})
    assert api.status_code == 403 and "another" in api.json()["detail"]


def test_the_share_box_gives_the_link(client: TestClient) -> None:
    run_id = run_in_cell(client)
    box = client.post(f"/runs/{run_id}/share", headers=PAGE)
    assert box.status_code == 200
    token = share(client, run_id)
    assert f'value="http://testserver/shared/{token}"' in box.text
    assert f'href="/shared/{token}"' in box.text


def test_a_run_without_a_cell_is_viewable_not_forkable(client: TestClient) -> None:
    body = {"problem": "vector_add", "backend": "numba-cpu", "source": SOURCE}
    run_id = client.post("/api/v1/runs", json=body).json()["id"]
    token = share(client, run_id)
    other = TestClient(client.app)
    page = other.get(f"/shared/{token}")
    assert page.status_code == 200 and "Correct" in page.text
    assert "data-fork" not in page.text and "sent through the API" in page.text
    shared = other.get(f"/api/v1/shared/{token}").json()
    assert shared["fork_url"] is None and shared["cell"] is None


def test_a_catalog_cell_run_forks_on_its_problem_page(client: TestClient) -> None:
    services = client.app.state.services  # type: ignore[attr-defined]
    embedded = {c.problem for ch in services.book.chapters() for c in ch.cells}
    spec = sorted(services.catalog.values(), key=lambda p: (p.slug in embedded, p.slug))[0]
    backend = "numba-cpu" if "numba-cpu" in spec.backends else spec.backends[0]
    cell = f"problem-{spec.slug}"
    data = {"backend": backend, "source": SOURCE}
    reply = client.post(f"/cells/{cell}/runs", data=data, headers=PAGE)
    assert reply.status_code == 201, reply.text
    run_id = re.search(r'data-run-id="([0-9a-f]{32})"', reply.text).group(1)  # type: ignore[union-attr]
    token = share(client, run_id)
    other = TestClient(client.app)
    shared = other.get(f"/api/v1/shared/{token}").json()
    assert shared["fork_url"] == f"/problems/{spec.slug}?fork={token}#cell-{cell}"
    assert shared["chapter"] is None
    page = other.get(shared["fork_url"].split("#")[0])
    # The problem's page has a cell of that problem (its own, or a chapter's that embeds it).
    assert page.status_code == 200 and 'class="kcell"' in page.text
    assert f'"problem": "{spec.slug}"' in page.text


def test_the_shared_chart_shows_only_the_shared_run(
    client: TestClient, executor: FakeExecutor
) -> None:
    run_in_cell(client)
    executor.script = lambda job: correct_result(job, median_us=50.0)
    second = run_in_cell(client, SOURCE + "# faster\n")
    assert len(roofline_points(client.get(f"/runs/{second}/card").text)) == 2  # the owner's
    page = TestClient(client.app).get(f"/shared/{share(client, second)}").text
    assert [p["label"] for p in roofline_points(page)] == ["the shared run"]
    assert "50.0 µs" in page and "vs previous run" not in page


def test_the_api_documents_the_new_errors(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    share_errors = set(paths["/api/v1/runs/{run_id}/share"]["post"]["responses"])
    assert {"403", "404", "409"} <= share_errors
    assert "404" in paths["/api/v1/shared/{token}"]["get"]["responses"]
    docs = client.get("/docs").text
    assert "/api/v1/shared/{token}" in docs and "no shared run has this token" in docs


# ---------------------------------------------------------------- any two attempts compared


def compare(client: TestClient, *run_ids: str, cell: str = CELL_ID):  # type: ignore[no-untyped-def]
    query = "&".join(f"run={r}" for r in run_ids)
    return client.get(f"/cells/{cell}/compare?{query}", headers=PAGE)


def test_any_two_attempts_compare(client: TestClient, executor: FakeExecutor) -> None:
    first = run_in_cell(client)
    executor.script = wrong_result
    run_in_cell(client, SOURCE.replace("pass", "out[0] = 1.0"))
    executor.script = lambda job: correct_result(job, median_us=25.0)
    third = run_in_cell(client, SOURCE.replace("pass", "out[:n] = a[:n] + b[:n]"))
    history = client.get(f"/cells/{CELL_ID}/history").text
    assert history.count("data-compare-pick") == 3 and "data-compare-form" in history
    # Not consecutive, and in either order: older first.
    html = compare(client, third, first).text
    assert "Attempt #1 and attempt #3" in html
    assert "Attempt #3 is 4.00× faster than Attempt #1." in html
    assert "<td>100 µs</td><td>25.0 µs</td>" in html
    assert '<span class="d-del">-    pass</span>' in html
    assert '<span class="d-add">+    out[:n] = a[:n] + b[:n]</span>' in html
    assert '<span class="d-ctx">--- attempt #1</span>' in html
    points = roofline_points(html)
    assert [(p["label"], p["current"]) for p in points] == [
        ("Attempt #1", False),
        ("Attempt #3", True),
    ]


def test_comparing_with_an_untimed_attempt_says_why(
    client: TestClient, executor: FakeExecutor
) -> None:
    first = run_in_cell(client)
    executor.script = wrong_result
    second = run_in_cell(client, SOURCE + "# broken\n")
    html = compare(client, first, second).text
    assert "Only timed attempts compare for speed" in html
    assert "Attempt #2 has no roofline point" in html
    assert [p["label"] for p in roofline_points(html)] == ["Attempt #1"]


def test_a_difference_within_the_noise_is_not_ranked(
    client: TestClient, executor: FakeExecutor
) -> None:
    first = run_in_cell(client)  # 100 µs, the middle half of its timings 98 to 103 µs
    executor.script = lambda job: correct_result(job, median_us=102.0)
    second = run_in_cell(client)
    html = html_text.unescape(compare(client, first, second).text)
    assert "Attempt #2 and Attempt #1 take about as long: 1.02× apart" in html
    assert "slower" not in html


def other_device(job: RunJob) -> RunResult:
    result = correct_result(job, median_us=40.0)
    assert result.roofline is not None
    roof = result.roofline.model_copy(update={"device": "Other Device 1"})
    return result.model_copy(update={"roofline": roof})


def test_attempts_on_two_devices_are_not_ranked(client: TestClient, executor: FakeExecutor) -> None:
    first = run_in_cell(client)
    executor.script = other_device
    second = run_in_cell(client)
    html = compare(client, first, second).text
    assert "timed on different devices (Fake Device 9000, Other Device 1)" in html
    assert "another device (Fake Device 9000): not plotted" in html
    assert "The two sources are the same" in html
    assert [p["label"] for p in roofline_points(html)] == ["Attempt #2"]


def test_a_bad_pick_says_what_is_wrong(client: TestClient) -> None:
    first = run_in_cell(client)
    second = run_in_cell(client)
    cases = [
        ((first,), 422, "pick exactly two different attempts to compare (picked 1)"),
        ((first, first), 422, "(picked 1)"),
        ((), 422, "(picked none)"),
        ((first, second, first, "f" * 32), 422, "(picked 3)"),
        ((first, "f" * 32), 404, f"no attempt {'f' * 32!r} of yours"),
        ((first, "x%00"), 404, "of yours"),
    ]
    for picks, status, words in cases:
        reply = compare(client, *picks)
        assert reply.status_code == status, (picks, reply.text)
        assert words in html_text.unescape(reply.text), (picks, reply.text)
        assert "data-compare-error" in reply.text
    other = TestClient(client.app)
    theirs = compare(other, first, second)
    assert theirs.status_code == 404 and "of yours" in theirs.text
    unknown = compare(client, first, second, cell="nope")
    assert unknown.status_code == 404
    assert "unknown cell 'nope'" in html_text.unescape(unknown.text)


def test_attempts_of_another_cell_do_not_compare(client: TestClient) -> None:
    here = run_in_cell(client)
    body = {"problem": "vector_add", "backend": "numba-cpu", "source": SOURCE}
    loose = client.post("/api/v1/runs", json=body).json()["id"]
    reply = compare(client, here, loose)
    assert reply.status_code == 422
    said = html_text.unescape(reply.text)
    assert f"attempt {loose!r} was not made in cell {CELL_ID!r}" in said


def test_one_attempt_offers_nothing_to_compare(client: TestClient) -> None:
    run_in_cell(client)
    history = client.get(f"/cells/{CELL_ID}/history").text
    assert "data-load-run" in history and "data-compare-pick" not in history
