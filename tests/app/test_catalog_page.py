"""The problem catalog's pages and the reader's progress: every problem listed and runnable
(a chapter's cell, or a cell of its own), and each reader's state on the catalog and the
contents, read in one query per page."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import event

from kplay.app.book import Book, BookError
from kplay.app.main import create_app
from kplay.app.services.catalog_view import embedding_cells
from kplay.app.services.problems import backend_title
from kplay.app.services.progress import reader_progress, tier_reached
from kplay.config import Settings
from kplay.kernels.catalog import load_catalog
from kplay.kernels.models import RunJob
from tests.app.fakes import FakeExecutor, compile_error_result, correct_result, wrong_result

PAGE = {"HX-Request": "true"}
# The fake's timed case moves 12 bytes per element of 4 Mi elements against a 1 TB/s roof:
# these medians put vector_add's run at 91 %, 63 % and 25 % of the roofline.
GOLD_US, BRONZE_US, UNTIERED_US = 55.0, 80.0, 200.0


def _entry(html: str, slug: str) -> str:
    found = re.search(
        rf'<article class="problem-entry" id="problem-{slug}".*?</article>', html, re.S
    )
    assert found, f"/problems does not list {slug}"
    return found.group(0)


def _state(html: str) -> tuple[str, str | None]:
    """(state, tier) of the first progress mark in `html`."""
    found = re.search(r'class="progress-state" data-state="(\w+)"(?: data-tier="(\w+)")?', html)
    assert found, "no progress mark"
    return found.group(1), found.group(2)


def _toc_cell(html: str, cell_id: str) -> str:
    found = re.search(rf'<li data-cell="{re.escape(cell_id)}">.*?</li>', html, re.S)
    assert found, f"the contents do not list cell {cell_id}"
    return found.group(0)


def _cell_data(html: str) -> dict[str, object]:
    blob = re.search(r'class="kcell-data">(.*?)</script>', html, re.S)
    assert blob, "no runnable cell on the page"
    return dict(json.loads(blob.group(1)))


def _run(client: TestClient, cell: str, backend: str, source: str = "def k(): pass\n") -> str:
    reply = client.post(
        f"/cells/{cell}/runs", data={"backend": backend, "source": source}, headers=PAGE
    )
    assert reply.status_code == 201, reply.text
    run_id = re.search(r'data-run-id="([0-9a-f]{32})"', reply.text)
    assert run_id
    return run_id.group(1)


def _timed(median_us: float) -> Callable[[RunJob], object]:
    return lambda job: correct_result(job, median_us=median_us)


def test_the_header_links_to_the_catalog(client: TestClient) -> None:
    for url in ("/", "/problems", "/book/p1/first-kernel-cpu"):
        assert '<a href="/problems">Problems</a>' in client.get(url).text


def test_every_problem_is_listed_with_its_arguments_backends_and_tiers(client: TestClient) -> None:
    html = client.get("/problems").text
    catalog = load_catalog()
    assert html.count('<article class="problem-entry"') == len(catalog)
    exercises = html.index('id="exercises"')
    for slug, spec in catalog.items():
        entry = _entry(html, slug)
        assert f'href="/problems/{slug}"' in entry and spec.title in entry
        assert (html.index(entry) > exercises) == spec.exercise
        for arg in spec.args:
            assert f"<code>{arg.name}</code>" in entry and f"<code>{arg.dtype}</code>" in entry
            if arg.shape:
                assert f"<code>[{', '.join(arg.shape)}]</code>" in entry
        for backend in spec.backends:
            assert f'<span class="problem-backend">{backend_title(backend)}</span>' in entry
        for tier in spec.tiers:
            assert f'<span class="tier-name">{tier.name}</span>' in entry
        assert _state(entry) == ("untried", None)
    # In the order the book first uses them, within each section.
    first_use = list(embedding_cells(client.app.state.services.book))  # type: ignore[attr-defined]
    for exercise in (False, True):
        used = [s for s in first_use if catalog[s].exercise == exercise]
        assert sorted(used, key=lambda s: html.index(f'id="problem-{s}"')) == used


def test_every_problem_page_opens_with_a_runnable_cell(client: TestClient) -> None:
    catalog = load_catalog()
    embedded = embedding_cells(client.app.state.services.book)  # type: ignore[attr-defined]
    for slug, spec in catalog.items():
        page = client.get(f"/problems/{slug}")
        assert page.status_code == 200, slug
        data = _cell_data(page.text)
        cell = str(data["cell"])
        assert data["problem"] == slug
        assert f'data-run-url="/cells/{cell}/runs"' in page.text
        assert "/static/vendor/editor.js" in page.text
        for offer in data["backends"]:  # type: ignore[attr-defined]
            assert offer["key"] in spec.backends
            assert offer["starter"] == spec.starter(offer["key"])
        homes = embedded.get(slug, [])
        if homes:
            assert cell in [c.id for _, c in homes]
            for chapter, c in homes:
                assert f'href="{chapter.url}#cell-{c.id}"' in page.text
        else:
            assert cell == f"problem-{slug}"
            assert [o["key"] for o in data["backends"]] == spec.backends  # type: ignore[attr-defined]


def test_a_problem_no_chapter_embeds_runs_in_a_cell_of_its_own(
    tmp_path: Path, make_settings: Callable[..., Settings], executor: FakeExecutor
) -> None:
    book = tmp_path / "book" / "p1"
    book.mkdir(parents=True)
    (book / "part.toml").write_text('title = "One"\n')
    (book / "01-only.md").write_text(
        "---\ntitle: Only\nslug: only\n---\nText.\n\n"
        "```kernel-cell\nid: only-vadd\nproblem: vector_add\nbackend: numba-cpu\n```\n"
    )
    settings = make_settings(book_dir=book.parent)
    with TestClient(create_app(settings, executor)) as client:
        listed = _entry(client.get("/problems").text, "saxpy")
        assert "No chapter embeds it yet" in listed
        page = client.get("/problems/saxpy").text
        data = _cell_data(page)
        assert data["cell"] == "problem-saxpy"
        spec = load_catalog()["saxpy"]
        executor.script = _timed(BRONZE_US)
        run_id = _run(client, "problem-saxpy", "numba-cpu", spec.starter("numba-cpu"))
        assert executor.jobs[-1].cell == "problem-saxpy" and executor.jobs[-1].problem == "saxpy"
        run = client.get(f"/api/v1/runs/{run_id}").json()
        assert run["cell"] == "problem-saxpy" and run["chapter"] is None
        history = client.get("/cells/problem-saxpy/history", headers=PAGE)
        assert history.status_code == 200 and run_id in history.text
        again = client.get("/problems/saxpy").text
        assert f'data-run-id="{run_id}"' in again  # the card comes back with the page
        assert _state(again) == ("tier", "bronze")
        assert _state(_entry(client.get("/problems").text, "saxpy")) == ("tier", "bronze")
        refused = client.post(
            "/cells/problem-no_such/runs", data={"backend": "cuda", "source": "x"}, headers=PAGE
        )
        assert refused.status_code == 404


def test_a_run_from_a_problem_page_is_the_chapters_too(
    app: FastAPI, client: TestClient, executor: FakeExecutor
) -> None:
    data = _cell_data(client.get("/problems/vector_add").text)
    cell = str(data["cell"])
    assert cell == "ch02-vadd-gpu"  # of the cells embedding it, the one with most backends
    executor.script = _timed(GOLD_US)
    _run(client, cell, str(data["backend"]))
    contents = client.get("/").text
    assert _state(_toc_cell(contents, cell)) == ("tier", "gold")
    assert _state(_toc_cell(contents, "ch01-vadd-cpu")) == ("untried", None)
    entry = _entry(client.get("/problems").text, "vector_add")
    assert _state(entry) == ("tier", "gold")
    link = re.search(rf'href="/book/p1/first-gpu-kernel#cell-{cell}".*?</li>', entry, re.S)
    assert link and _state(link.group(0)) == ("tier", "gold")

    other = TestClient(app)  # a second browser: a reader of its own
    assert 'data-state="untried"' in other.get("/").text
    for html in (other.get("/").text, other.get("/problems").text):
        assert re.findall(r'data-state="(\w+)"', html) and set(
            re.findall(r'data-state="(\w+)"', html)
        ) == {"untried"}
    assert 'class="run-empty"' in other.get("/problems/vector_add").text


def test_the_best_run_counts(client: TestClient, executor: FakeExecutor) -> None:
    cell, steps = "ch01-vadd-cpu", []
    for script, expected in (
        (wrong_result, ("wrong", None)),
        (_timed(UNTIERED_US), ("correct", None)),
        (wrong_result, ("correct", None)),
        (_timed(BRONZE_US), ("tier", "bronze")),
        (compile_error_result, ("tier", "bronze")),
        (_timed(GOLD_US), ("tier", "gold")),
        (_timed(BRONZE_US), ("tier", "gold")),
    ):
        executor.script = script  # type: ignore[assignment]
        _run(client, cell, "numba-cpu")
        steps.append(_state(_toc_cell(client.get("/").text, cell)))
        assert steps[-1] == expected, steps
    mark = _toc_cell(client.get("/").text, cell)
    assert "</span>Gold<span" in mark and "7 runs" in mark


def test_a_run_in_flight_shows_as_running(client: TestClient, executor: FakeExecutor) -> None:
    executor.hold = True
    _run(client, "ch01-saxpy-cpu", "numba-cpu")
    assert _state(_toc_cell(client.get("/").text, "ch01-saxpy-cpu")) == ("running", None)
    executor.release(executor.jobs[-1].job_id, wrong_result(executor.jobs[-1]))
    assert _state(_toc_cell(client.get("/").text, "ch01-saxpy-cpu")) == ("wrong", None)


def test_tiers_by_share_of_the_baseline() -> None:
    spec = load_catalog()["gemm_coalesce"]  # bronze 3 %, silver 8 %, gold 11 % of the baseline
    assert [t.percent_of_baseline for t in spec.tiers] == [3, 8, 11]
    assert tier_reached(spec, 99.0, None) is None  # untimed against the baseline: no tier
    assert tier_reached(spec, 1.0, 0.02) is None
    assert tier_reached(spec, 1.0, 0.09).name == "silver"  # type: ignore[union-attr]
    assert tier_reached(spec, 1.0, 0.5).name == "gold"  # type: ignore[union-attr]
    both = spec.model_copy(
        update={"tiers": [spec.tiers[0].model_copy(update={"percent_of_roofline": 50})]}
    )
    assert tier_reached(both, 40.0, 0.5) is None and tier_reached(both, 60.0, 0.5) is not None
    assert tier_reached(both, float("nan"), 0.5) is None


def _count_run_queries(app: FastAPI) -> list[str]:
    seen: list[str] = []
    engine = app.state.services.db.engine

    @event.listens_for(engine, "before_cursor_execute")
    def _watch(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        if re.search(r"\bruns\b", statement):
            seen.append(statement)

    return seen


def test_one_query_per_page_whatever_the_cells(
    app: FastAPI, client: TestClient, executor: FakeExecutor
) -> None:
    for cell, backend in (("ch01-vadd-cpu", "numba-cpu"), ("ch02-saxpy-gpu", "cuda")):
        _run(client, cell, backend)
    client.get("/")  # the session exists before counting
    seen = _count_run_queries(app)
    client.get("/")
    assert len(seen) == 1, seen
    seen.clear()
    client.get("/problems")
    assert len(seen) == 1, seen


def test_progress_reads_the_same_on_every_database(
    make_settings: Callable[..., Settings], database_url: str, executor: FakeExecutor
) -> None:
    app = create_app(make_settings(database_url=database_url), executor)
    with TestClient(app) as client:
        executor.script = _timed(GOLD_US)
        _run(client, "ch01-vadd-cpu", "numba-cpu")
        executor.script = wrong_result
        _run(client, "ch02-saxpy-gpu", "cuda")
        services = app.state.services
        progress = reader_progress(services.db, services.catalog, executor.jobs[0].user)
    assert progress.cell("ch01-vadd-cpu").tier.name == "gold"  # type: ignore[union-attr]
    assert progress.cell("ch02-saxpy-gpu").key == "wrong"
    assert progress.problem("vector_add").runs == 1 and progress.problem("saxpy").key == "wrong"
    assert progress.cell("ch06-transpose").key == "untried"


def test_an_unknown_problem_is_a_404_that_suggests_one(client: TestClient) -> None:
    close = client.get("/problems/vector_ad")
    assert close.status_code == 404 and "<html" in close.text
    assert "did you mean" in close.text
    assert '<a href="/problems/vector_add" data-suggestion>' in close.text
    far = client.get("/problems/qqqqqq")
    assert far.status_code == 404 and "data-suggestion" not in far.text
    assert "Known problems" in far.text and 'href="/problems"' in far.text


def test_a_chapter_may_not_take_a_catalog_cell_id(tmp_path: Path) -> None:
    folder = tmp_path / "p1"
    folder.mkdir()
    (folder / "part.toml").write_text('title = "One"\n')
    (folder / "01-a.md").write_text(
        "---\ntitle: A\n---\n\n```kernel-cell\nid: problem-saxpy\nproblem: saxpy\n"
        "backend: numba-cpu\n```\n"
    )
    with pytest.raises(BookError, match="belong to the problem catalog"):
        Book(tmp_path, load_catalog()).chapters()
