"""The exercise kinds through the app: a fix cell solved by a correct run, a prediction stored
before its run and locked once the run starts, a stored profile's answers graded on the
server, and the answer key in no page and no JSON."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select

from kplay.app.db.exercisemodels import Prediction, ProfileAnswer
from kplay.app.main import create_app
from kplay.app.services.progress import reader_progress
from kplay.app.services.progressview import progress_page
from kplay.config import Settings
from kplay.kernels.models import RunJob, RunResult
from kplay.kernels.ncuprofile import read_profile
from tests.app.fakes import FakeExecutor, correct_result, wrong_result

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "book" / "p3" / "profiles" / "sgemm-warptile-h200"
PAGE = {"HX-Request": "true"}
FIX, PREDICT, READ = "p2-smem-tiling-fix", "ch03-triad-predict", "p3-read-profile-rung7"
TRIAD = "import numba\n\n@numba.njit\ndef triad(a, b, c, s, n):\n    pass\n"


class Scripted:
    """Each job's result by the order of submission; records what the database held then."""

    def __init__(self, results: list[Callable[[RunJob], RunResult]]) -> None:
        self.results = results
        self.app: FastAPI | None = None
        self.seen_predictions: list[list[tuple[str, float | None, str | None]]] = []

    def __call__(self, job: RunJob) -> RunResult:
        assert self.app is not None
        db = self.app.state.services.db
        with db.session() as s:
            rows = s.scalars(select(Prediction).where(Prediction.cell_id == job.cell)).all()
            self.seen_predictions.append([(r.cell_id, r.value, r.run_id) for r in rows])
        make = self.results[min(len(self.seen_predictions), len(self.results)) - 1]
        return make(job)


@pytest.fixture
def scripted() -> Scripted:
    return Scripted([correct_result])


@pytest.fixture
def app_client(
    make_settings: Callable[..., Settings], scripted: Scripted
) -> Iterator[tuple[FastAPI, TestClient]]:
    app = create_app(make_settings(), FakeExecutor(scripted))
    scripted.app = app
    with TestClient(app) as client:
        yield app, client


def _page(client: TestClient, url: str) -> str:
    reply = client.get(url)
    assert reply.status_code == 200, reply.text[:500]
    return reply.text


def _cell_data(html: str, cell_id: str) -> dict[str, object]:
    section = html[html.index(f'id="cell-{cell_id}"') :]
    found = re.search(r'<script type="application/json" class="kcell-data">(.*?)</script>', section)
    assert found
    return dict(json.loads(found.group(1)))


# ------------------------------------------------------------------ fix


def test_a_fix_cell_starts_from_the_wrong_kernel_and_is_solved_by_a_correct_run(
    app_client: tuple[FastAPI, TestClient], scripted: Scripted
) -> None:
    app, client = app_client
    scripted.results = [wrong_result, correct_result]
    html = _page(client, "/book/p2/gemm-smem-tiling")
    data = _cell_data(html, FIX)
    wrong = REPO / "kernels/problems/gemm_smem_tiling/solutions/wrong/tiles_k_rounded_down.cu"
    starter = data["backends"][0]["starter"]  # type: ignore[index]
    # The wrong kernel, less the comment that says what is wrong with it.
    assert "WRONG" not in starter and "rounded down" not in starter
    assert starter.strip() in wrong.read_text()
    assert "kplay: grid=" in starter
    assert "Find what the failing shapes have in common" in html
    assert 'data-fixed="false"' in html

    source = wrong.read_text()
    body = {"problem": "gemm_smem_tiling", "backend": "cuda", "source": source, "cell": FIX}
    assert client.post("/api/v1/runs", json=body).status_code == 201
    described = client.get(f"/api/v1/cells/{FIX}/exercise")
    state = described.json()
    assert state["kind"] == "fix" and state["state"]["fixed"] is False
    # Neither the page nor the JSON names the wrong kernel's file: its name is the bug's.
    assert "rounded_down" not in described.text and "rounded_down" not in html
    assert state["state"]["note"].startswith("Not fixed yet")

    assert client.post("/api/v1/runs", json=body).status_code == 201
    state = client.get(f"/api/v1/cells/{FIX}/exercise").json()
    assert state["state"] == {"fixed": True, "runs": 2, "note": state["state"]["note"]}
    panel = client.get(f"/cells/{FIX}/exercise")
    assert 'data-fixed="true"' in panel.text
    # Progress counts the exercise as any cell: correct once a run is.
    user = client.get("/api/v1/runs/" + _latest_run(client, FIX)).json()["user"]
    progress = reader_progress(app.state.services.db, app.state.services.catalog, user)
    assert progress.cell(FIX).key == "correct"


def _latest_run(client: TestClient, cell: str) -> str:
    return str(client.get(f"/api/v1/cells/{cell}/runs").json()[0]["id"])


# ------------------------------------------------------------------ predict


def _predicted_run(client: TestClient, prediction: str, source: str = TRIAD) -> str:
    form = {"prediction": prediction, "backend": "numba-cpu", "source": source}
    return client.post(f"/cells/{PREDICT}/predicted-runs", data=form, headers=PAGE).text


def test_the_run_button_stores_the_prediction_before_the_run_and_grades_it(
    app_client: tuple[FastAPI, TestClient], scripted: Scripted
) -> None:
    _app, client = app_client
    html = _page(client, "/book/p1/roofline")
    section = html[html.index(f'id="cell-{PREDICT}"') :]
    section = section[: section.index("</section>")]
    assert f'data-run-url="/cells/{PREDICT}/predicted-runs"' in section
    assert section.index('name="prediction"') < section.index("data-run>")

    card = _predicted_run(client, "45")
    assert "data-run-card" in card
    # When the executor had the job, the prediction was already stored, its run not yet set.
    assert scripted.seen_predictions == [[(PREDICT, 45.0, None)]]
    state = client.get(f"/api/v1/cells/{PREDICT}/exercise").json()["state"]
    # The fake run reaches 50.3% of its roofline: 45 is within the tolerance of 15.
    assert state["locked"] is True and state["predicted"] == "45 %"
    assert state["measured"] == "50.3 %" and state["within_tolerance"] is True
    panel = client.get(f"/cells/{PREDICT}/exercise").text
    assert 'data-within="true"' in panel and "45 %" in panel and "50.3 %" in panel

    _predicted_run(client, "90")
    state = client.get(f"/api/v1/cells/{PREDICT}/exercise").json()["state"]
    assert state["predicted"] == "90 %" and state["within_tolerance"] is False
    assert state["note"] == (
        "39.7 percentage points above the measurement; within 15 percentage points counts"
    )


def test_a_run_without_a_prediction_is_refused_and_nothing_runs(
    app_client: tuple[FastAPI, TestClient], scripted: Scripted
) -> None:
    _app, client = app_client
    for given, words in (("", "write your prediction before you run"), ("lots", "not a number")):
        reply = client.post(
            f"/cells/{PREDICT}/predicted-runs",
            data={"prediction": given, "backend": "numba-cpu", "source": TRIAD},
            headers=PAGE,
        )
        assert reply.status_code == 422 and words in reply.text
    assert scripted.seen_predictions == []
    assert client.get(f"/api/v1/cells/{PREDICT}/runs").json() == []


def test_a_prediction_cannot_change_once_its_run_started(
    app_client: tuple[FastAPI, TestClient], scripted: Scripted
) -> None:
    app, client = app_client
    made = client.post(f"/api/v1/cells/{PREDICT}/predictions", json={"value": "30"})
    assert made.status_code == 201 and made.json()["locked"] is False
    pid = made.json()["prediction"]
    # Before the run, it may change.
    changed = client.put(f"/api/v1/predictions/{pid}", json={"value": "40"})
    assert changed.status_code == 200 and changed.json()["predicted"] == "40 %"

    run = client.post(
        f"/api/v1/predictions/{pid}/run", json={"backend": "numba-cpu", "source": TRIAD}
    )
    assert run.status_code == 201, run.text
    assert scripted.seen_predictions == [[(PREDICT, 40.0, None)]]

    late = client.put(f"/api/v1/predictions/{pid}", json={"value": "50"})
    assert late.status_code == 409
    assert "cannot change after its run" in late.json()["detail"]
    again = client.post(
        f"/api/v1/predictions/{pid}/run", json={"backend": "numba-cpu", "source": TRIAD}
    )
    assert again.status_code == 409
    read = client.get(f"/api/v1/predictions/{pid}").json()
    assert read["predicted"] == "40 %" and read["run"] == run.json()["run"]
    assert read["within_tolerance"] is True  # 40 against 50.3, within 15

    # Another reader sees no prediction of this one's.
    other = TestClient(app)  # no cookie: another reader, on the same running app
    assert other.get(f"/api/v1/predictions/{pid}").status_code == 404
    assert other.put(f"/api/v1/predictions/{pid}", json={"value": "1"}).status_code == 404


# ------------------------------------------------------------------ profile


def _truth() -> dict[str, object]:
    """The answers, computed here from the CSV pages by the engine's reader alone."""
    pages = [(PROFILE / f"{p}.csv").read_text() for p in ("details", "raw", "source")]
    prof = read_profile(*pages)
    stalls = [s for s in prof.stalls if s["reason"] != "selected"]
    return {
        "q1": max(prof.speed_of_light, key=lambda k: prof.speed_of_light[k]),
        "q2": stalls[0]["reason"],
        "q3": prof.occupancy["Achieved Occupancy"] * 64 / 100,
        "q4": prof.memory["dram_read_bytes"] / 1e6,
        "q5": prof.lines[0].line,
    }


def test_profile_answers_are_graded_on_the_server(app_client: tuple[FastAPI, TestClient]) -> None:
    app, client = app_client
    truth = _truth()
    right = {
        "q1": str(truth["q1"]),
        "q2": str(truth["q2"]),
        "q3": f"{float(truth['q3']) + 0.4:.2f}",  # within 0.5
        "q4": f"{float(truth['q4']) * 1.015:.0f}",  # within 2%
        "q5": str(truth["q5"]),
    }
    partly = client.post(f"/api/v1/cells/{READ}/answers", json={"answers": {"q1": right["q1"]}})
    assert partly.json()["score"] == 1 and partly.json()["solved"] is False
    user = _reader(app)
    assert _cell_progress(app, user) == ("wrong", 1)
    graded = client.post(f"/api/v1/cells/{READ}/answers", json={"answers": right}).json()
    assert graded["score"] == 5 and graded["solved"] is True
    # The contents and the progress page count the cell as solved, each check an attempt.
    assert _cell_progress(app, user) == ("correct", 2)
    wrong = {
        "q1": "DRAM Throughput",
        "q2": "long_sb",
        "q3": f"{float(truth['q3']) + 0.6:.2f}",
        "q4": f"{float(truth['q4']) * 1.03:.0f}",
        "q5": str(int(truth["q5"]) + 1),  # type: ignore[call-overload]
    }
    graded = client.post(f"/api/v1/cells/{READ}/answers", json={"answers": wrong}).json()
    assert [a["correct"] for a in graded["answers"]] == [False] * 5 and graded["score"] == 0
    assert _cell_progress(app, user) == ("wrong", 3)
    # The HTML form of the same, from the page's own script.
    panel = client.post(f"/cells/{READ}/answers", data={"q5": right["q5"]}, headers=PAGE)
    assert panel.status_code == 200 and 'data-mark="q5" data-correct="true"' in panel.text


def _reader(app: FastAPI) -> str:
    """The reader's owner name, as their answers are stored under it."""
    db = app.state.services.db
    with db.session() as s:
        return str(s.scalars(select(ProfileAnswer.user)).first())


def _cell_progress(app: FastAPI, user: str) -> tuple[str, int]:
    services = app.state.services
    progress = reader_progress(services.db, services.catalog, user).cell(READ)
    page = progress_page(services.book, services.catalog, services.db, user)
    rows = [r for part in page.parts for ch in part.chapters for r in ch.rows if r.key == READ]
    assert rows and rows[0].progress.key == progress.key
    return progress.key, progress.runs


@pytest.mark.parametrize(
    ("answers", "words"),
    [
        ({"q9": "1"}, "no question 'q9'"),
        ({"q3": "eleven"}, "is not a number"),
        ({"q2": "sleepy"}, "is not one of the choices"),
        ({"q1": " "}, "no answer given"),
    ],
)
def test_bad_answers_are_refused_in_words(
    app_client: tuple[FastAPI, TestClient], answers: dict[str, str], words: str
) -> None:
    _app, client = app_client
    reply = client.post(f"/api/v1/cells/{READ}/answers", json={"answers": answers})
    assert reply.status_code == 422 and words in reply.json()["detail"]


def test_the_answer_key_reaches_no_page_and_no_json(app_client: tuple[FastAPI, TestClient]) -> None:
    _app, client = app_client
    truth = _truth()
    html = _page(client, "/book/p3/profiling")
    described = client.get(f"/api/v1/cells/{READ}/exercise").text
    answered = client.post(
        f"/api/v1/cells/{READ}/answers", json={"answers": {"q3": "3", "q4": "9"}}
    ).text
    panel = client.get(f"/cells/{READ}/exercise").text
    # Answers computed from the profile, which the panel never shows as such.
    warps, megabytes = float(truth["q3"]), float(truth["q4"])
    for text in (html, described, answered, panel):
        for shown in (f"{warps:.1f}", f"{warps:.2f}", f"{megabytes:.0f}", f"{megabytes:.1f}"):
            assert shown not in text, shown
        assert "answer_key" not in text and '"answer":' not in text
    questions = json.loads(described)["questions"]
    assert {tuple(sorted(q)) for q in questions} == {
        ("answer_kind", "choices", "id", "text", "tolerance")
    }
    # A choice question's options are in an order that says nothing of the answer.
    stall = next(q for q in questions if q["id"] == "q2")
    values = [c["value"] for c in stall["choices"]]
    assert values == sorted(values) and truth["q2"] in values


def test_a_predicted_verdict_is_right_or_wrong(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    part = tmp_path / "book" / "p1"
    part.mkdir(parents=True)
    (part / "part.toml").write_text('title = "One"\n')
    cell = (
        "id: verdict-cell\nproblem: saxpy\nbackend: numba-cpu\nkind: predict\n"
        "question: Will this kernel pass its checks?\npredict: verdict\n"
    )
    (part / "01-one.md").write_text(
        f"---\ntitle: One\nslug: one\n---\n\n```kernel-cell\n{cell}```\n"
    )
    app = create_app(make_settings(book_dir=tmp_path / "book"), FakeExecutor(wrong_result))
    with TestClient(app) as client:
        html = _page(client, "/book/p1/one")
        assert '<option value="wrong">wrong answer</option>' in html
        for guess, right in (("wrong", True), ("done", False)):
            form = {"prediction": guess, "backend": "numba-cpu", "source": TRIAD}
            reply = client.post("/cells/verdict-cell/predicted-runs", data=form, headers=PAGE)
            assert reply.status_code == 201, reply.text
            state = client.get("/api/v1/cells/verdict-cell/exercise").json()["state"]
            assert state["measured"] == "wrong answer" and state["within_tolerance"] is right
        refused = client.post(
            "/cells/verdict-cell/predicted-runs",
            data={"prediction": "maybe", "backend": "numba-cpu", "source": TRIAD},
            headers=PAGE,
        )
        assert refused.status_code == 422 and "is not a verdict" in refused.text
