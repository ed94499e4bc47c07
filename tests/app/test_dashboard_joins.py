"""Learners who join (or leave) a cohort while its dashboard is open: the page's next update
brings the whole heatmap with their rows, once; a page made with today's learners gets
only its changed cells, as before. And a first page's failures by message, read after it
is made, reach its next update. Through the app, on SQLite."""

from __future__ import annotations

import re
import time

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import delete

from kplay.app.db.classroom import CohortMember
from kplay.app.services.accounts import Accounts, owner_key
from tests.app.fakes import wrong_result
from tests.app.storedruns import at, store
from tests.app.test_accounts import log_in
from tests.app.test_dashboard import PASSWORD, VADD, job, make_cohort

POLL = re.compile(r'id="dash-poll" data-cursor="(\d+)" hx-get="([^"]+)"')
ROW = re.compile(r'<tr data-learner="(\d+)">')


def _poll(html: str) -> str:
    """The next update's path, as the page's poller would ask it."""
    found = POLL.search(html)
    assert found is not None, html[:500]
    return found.group(2).replace("&amp;", "&")


def _join(client: TestClient, cohort: int, name: str) -> int:
    db = client.app.state.services.db  # type: ignore[attr-defined]
    uid = Accounts(db).create(f"{name}@example.org", PASSWORD, name).id
    with db.session() as s:
        s.add(CohortMember(cohort_id=cohort, user_id=uid, role="learner"))
    return uid


def test_a_learner_who_joins_gets_a_row_on_the_open_page(app: FastAPI) -> None:
    with TestClient(app) as client:
        ids = make_cohort(client.app.state.services.db, [])  # type: ignore[attr-defined]
        c = ids["cohort"]
        log_in(client, "teach@example.org", PASSWORD)
        page = client.get(f"/cohorts/{c}/dashboard").text
        assert "No learner has joined yet." in page and ROW.findall(page) == []
        quiet = client.get(_poll(page)).text
        assert 'id="dash-heat"' not in quiet  # nobody joined: no heatmap again

        ana = _join(client, c, "ana")
        update = client.get(_poll(quiet)).text
        assert 'id="dash-heat"' in update and 'hx-swap-oob="true"' in update
        assert ROW.findall(update) == [str(ana)]
        assert f'id="c{ana}-0"' in update and 'data-state="untried"' in update
        assert 'id="dash-tally"' in update and "1 learner ·" in update
        # The next poll carries the new mark: nothing more to send.
        after = client.get(_poll(update)).text
        assert 'id="dash-heat"' not in after and ROW.findall(after) == []

        # A second one joins, the first leaves: the rows follow.
        bo = _join(client, c, "bo")
        with client.app.state.services.db.session() as s:  # type: ignore[attr-defined]
            s.execute(delete(CohortMember).where(CohortMember.user_id == ana))
        moved = client.get(_poll(after)).text
        assert ROW.findall(moved) == [str(bo)] and "bo</a>" in moved

        # A reload shows the same rows, and its poller has the same mark.
        again = client.get(f"/cohorts/{c}/dashboard").text
        assert ROW.findall(again) == [str(bo)]
        assert 'id="dash-heat"' not in client.get(_poll(again)).text


def test_a_bad_mark_is_refused(app: FastAPI) -> None:
    with TestClient(app) as client:
        ids = make_cohort(client.app.state.services.db, ["ana"])  # type: ignore[attr-defined]
        log_in(client, "teach@example.org", PASSWORD)
        bad = client.get(f"/cohorts/{ids['cohort']}/dashboard/updates?since=0&members=<x>")
        assert bad.status_code == 422 and "members" in str(bad.json()["detail"])


def test_a_first_pages_failures_reach_its_next_update(app: FastAPI) -> None:
    with TestClient(app) as client:
        db = client.app.state.services.db  # type: ignore[attr-defined]
        ids = make_cohort(db, ["ana"])
        store(db, owner_key(ids["ana"]), wrong_result(job(VADD)), at(0), cell=VADD)
        log_in(client, "teach@example.org", PASSWORD)
        page = client.get(f"/cohorts/{ids['cohort']}/dashboard").text
        assert 'data-failures-ready="false"' in page and "No failed run yet." in page
        boards = client.app.state.dashboards  # type: ignore[attr-defined]
        state = boards.peek(ids["cohort"])
        for _ in range(200):  # read by a thread once the page was made
            if state.failures_ready:
                break
            time.sleep(0.01)
        update = client.get(_poll(page)).text
        assert 'data-failures-ready="true"' in update
        assert "cases differ from the reference" in update and 'data-count="1"' in update
