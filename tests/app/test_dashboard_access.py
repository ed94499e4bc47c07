"""Who sees a cohort's dashboard, its updates, a learner's attempts and the gradebook: the
cohort's instructors and admins; anyone else (anonymous, its own learners, learners and
instructors of another cohort) gets 404 in words. And what the pages say, through the app:
a learner's run submitted through the API reaches the next update, and only it."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from kplay.app.services.accounts import Accounts
from tests.app.test_accounts import log_in
from tests.app.test_dashboard import PASSWORD, SAXPY, VADD, make_cohort

CURSOR = re.compile(r'id="dash-poll" data-cursor="(\d+)"')


@pytest.fixture
def world(app: FastAPI) -> Iterator[tuple[TestClient, dict[str, int]]]:
    with TestClient(app) as client:
        db = client.app.state.services.db  # type: ignore[attr-defined]
        ids = make_cohort(db, ["ana", "bo"])
        other = make_cohort(db, ["zed"], instructor="otto")
        ids.update({k: v for k, v in other.items() if k != "cohort"}, other_cohort=other["cohort"])
        ids["root"] = Accounts(db).create("root@example.org", PASSWORD, "root", role="admin").id
        yield client, ids


def _paths(ids: dict[str, int]) -> list[str]:
    c = ids["cohort"]
    return [
        f"/cohorts/{c}/dashboard",
        f"/cohorts/{c}/dashboard/updates?since=0",
        f"/cohorts/{c}/learners/{ids['ana']}",
        f"/cohorts/{c}/gradebook.csv",
    ]


@pytest.mark.parametrize("who", [None, "ana", "zed", "otto"])
def test_everyone_but_its_instructors_and_admins_gets_404(
    world: tuple[TestClient, dict[str, int]], who: str | None
) -> None:
    client, ids = world
    if who is not None:
        assert log_in(client, f"{who}@example.org", PASSWORD).status_code == 303  # type: ignore[attr-defined]
    for path in _paths(ids):
        reply = client.get(path)
        assert reply.status_code == 404, path
        assert f"There is no cohort {ids['cohort']} that you teach" in reply.text, path
        assert "Kernels 101" not in reply.text and "ana@example.org" not in reply.text
    # A cohort that does not exist reads the same.
    missing = client.get("/cohorts/999999/dashboard")
    assert missing.status_code == 404 and "There is no cohort 999999" in missing.text


@pytest.mark.parametrize("who", ["teach", "root"])
def test_its_instructor_and_an_admin_see_it(
    world: tuple[TestClient, dict[str, int]], who: str
) -> None:
    client, ids = world
    assert log_in(client, f"{who}@example.org", PASSWORD).status_code == 303  # type: ignore[attr-defined]
    for path in _paths(ids):
        assert client.get(path).status_code == 200, path
    page = client.get(f"/cohorts/{ids['cohort']}/dashboard").text
    assert "Kernels 101" in page and 'data-learner="' in page
    assert f'id="c{ids["ana"]}-0"' in page and 'data-state="untried"' in page
    assert "zed" not in page  # another cohort's learner
    # Not a learner of this cohort: 404 in words.
    stranger = client.get(f"/cohorts/{ids['cohort']}/learners/{ids['zed']}")
    assert stranger.status_code == 404 and "has no learner" in stranger.text


def test_bad_parameters_are_named(world: tuple[TestClient, dict[str, int]]) -> None:
    client, ids = world
    log_in(client, "teach@example.org", PASSWORD)
    bad = client.get(f"/cohorts/{ids['cohort']}/dashboard?stuck_fails=0")
    assert bad.status_code == 422 and "stuck_fails" in bad.json()["detail"]
    bad = client.get(f"/cohorts/{ids['cohort']}/dashboard/updates?since=soon")
    assert bad.status_code == 422 and "since" in bad.json()["detail"]


def test_a_learners_run_reaches_the_next_update_and_only_it(
    world: tuple[TestClient, dict[str, int]],
) -> None:
    client, ids = world
    c = ids["cohort"]
    log_in(client, "teach@example.org", PASSWORD)
    page = client.get(f"/cohorts/{c}/dashboard?stuck_fails=3&stuck_minutes=0").text
    cursor = CURSOR.search(page)
    assert cursor is not None and "No one is stuck." in page
    with TestClient(client.app) as learner:
        log_in(learner, "bo@example.org", PASSWORD)
        run = {"problem": "vector_add", "backend": "numba-cpu", "source": "x = 1\n", "cell": VADD}
        made = learner.post("/api/v1/runs", json=run)
        assert made.status_code in (200, 201, 202), made.text
        run_id = made.json()["id"]
    update = client.get(f"/cohorts/{c}/dashboard/updates?since={cursor.group(1)}").text
    cells = re.findall(r'<td id="(c[^"]+)"[^>]*hx-swap-oob="true"', update)
    assert cells == [f"c{ids['bo']}-0"]
    assert 'data-state="correct"' in update or 'data-state="tier"' in update
    assert 'id="dash-failures"' in update and 'id="dash-times"' in update
    assert f'<td id="s{ids["bo"]}" class="num" hx-swap-oob="true">1</td>' in update
    newer = CURSOR.search(update)
    assert newer is not None and int(newer.group(1)) > int(cursor.group(1))
    # Read again a little later: the cursor moved past it, so no cell comes back.
    calm = client.get(f"/cohorts/{c}/dashboard/updates?since={int(newer.group(1)) + 10**7}")
    assert 'hx-swap-oob="true"' in calm.text  # the stuck list is always sent
    assert re.findall(r"<td id=", calm.text) == [] and 'id="dash-failures"' not in calm.text

    drill = client.get(f"/cohorts/{c}/learners/{ids['bo']}").text
    assert f'data-attempt="{run_id}"' in drill and f'href="/runs/{run_id}/card"' in drill
    assert "The first attempt on this exercise." in drill

    book = client.get(f"/cohorts/{c}/gradebook.csv")
    assert book.headers["content-type"].startswith("text/csv")
    assert "attachment" in book.headers["content-disposition"]
    rows = {r[0]: r for r in csv.reader(io.StringIO(book.text))}
    assert rows["bo"][2] in ("correct", "tier") and rows["ana"][2] == "untried"
    assert rows["learner"][-4:] == [f"{SAXPY} {w}" for w in ("state", "tier", "score", "late")]
