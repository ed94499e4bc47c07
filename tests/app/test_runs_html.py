"""The cell's HTML endpoints: the run card in every state, error cards, attempt history."""

from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient

from kplay.kernels.models import RunJob, RunResult, RunState, SystemInfo, TimingStage
from tests.app.fakes import (
    FakeExecutor,
    compile_error_result,
    correct_result,
    wrong_result,
)

CELL = "/cells/ch01-vadd-cpu/runs"
SOURCE = "import numba\n\n@numba.njit\ndef vector_add(a, b, out, n):\n    pass\n"


PAGE = {"HX-Request": "true"}


def post(client: TestClient, **fields: str):  # type: ignore[no-untyped-def]
    data = {"backend": "numba-cpu", "source": SOURCE, **fields}
    return client.post(CELL, data=data, headers=PAGE)


def json_block(html: str, cls: str) -> dict:
    found = re.search(rf'<script type="application/json" class="{cls}">(.*?)</script>', html, re.S)
    assert found is not None, f"no {cls} block"
    return json.loads(found.group(1))


@pytest.mark.parametrize("executor", [FakeExecutor(hold=True)])
def test_live_card_polls_itself_until_final(client: TestClient, executor: FakeExecutor) -> None:
    reply = post(client)
    assert reply.status_code == 201
    run_id = executor.jobs[0].job_id
    live = reply.text
    assert f'hx-get="/runs/{run_id}/card"' in live and 'hx-trigger="every 500ms"' in live
    assert 'data-final="false"' in live and "Starting…" in live
    assert "A worker has taken the run." in live
    executor.progress(run_id, RunState.checking, "case 3 of 7")
    polled = client.get(f"/runs/{run_id}/card").text
    assert "case 3 of 7" in polled and 'class="step step-active" aria-current="step"' in polled
    assert "step step-done" in polled  # queued and compile are behind it
    executor.release(run_id)
    final = client.get(f"/runs/{run_id}/card").text
    assert "hx-trigger" not in final and 'data-final="true"' in final
    assert "Correct" in final


@pytest.mark.parametrize("executor", [FakeExecutor(hold=True)])
def test_queue_position_is_shown(client: TestClient, executor: FakeExecutor) -> None:
    post(client)
    post(client)
    second = executor.jobs[1].job_id
    card = client.get(f"/runs/{second}/card").text
    assert "1 run ahead in the queue; about 4.00 s to wait." in card


def test_final_card_shows_numbers_chart_and_details(client: TestClient) -> None:
    html = post(client).text
    assert "Correct" in html and "100 µs" in html
    for label in ("throughput", "bandwidth", "of roofline", "memory-bound"):
        assert label in html
    chart = json_block(html, "roofline-data")
    assert chart["device"] == "Fake Device 9000" and chart["source"] == "calibrated"
    assert chart["memory_bytes_per_s"] == 1.0e12 and chart["compute_name"] == "fp32"
    assert [p["current"] for p in chart["points"]] == [True]
    for fold in ("Timing", "Roofline numbers", "Compiler", "System"):
        assert f"<summary>{fold}" in html
    assert "PTX (3 lines)" in html and "registers" in html


def test_second_run_compares_with_the_first(client: TestClient, executor: FakeExecutor) -> None:
    post(client)
    executor.script = lambda job: correct_result(job, median_us=50.0)
    html = post(client).text
    assert "vs previous run" in html and "2.00×" in html and "was 100 µs" in html
    chart = json_block(html, "roofline-data")
    assert [p["current"] for p in chart["points"]] == [False, True]
    assert chart["points"][0]["label"] == "attempt #1"


@pytest.mark.parametrize("executor", [FakeExecutor(script=compile_error_result)])
def test_compile_error_dispatches_diagnostics(client: TestClient) -> None:
    html = post(client).text
    assert "Compile error" in html and 'data-goto-line="3"' in html
    diag = json_block(html, "run-diagnostics")
    assert diag == {
        "cell": "ch01-vadd-cpu",
        "backend": "numba-cpu",
        "diagnostics": [
            {"line": 3, "column": None, "severity": "error", "message": "expected a ';'"}
        ],
    }
    assert "step step-failed" in html and "roofline-data" not in html


@pytest.mark.parametrize("executor", [FakeExecutor(script=wrong_result)])
def test_wrong_answer_shows_first_mismatch(client: TestClient) -> None:
    html = post(client).text
    assert "Wrong answer" in html and "1 of 2 test cases passed" in html
    table = html[html.index('class="run-mismatches"') :]
    assert "one past a block" in table and "[256]" in table and "1.5" in table and ">NaN<" in table


def untimed(kind: str, reason: str):  # type: ignore[no-untyped-def]
    def script(job: RunJob) -> RunResult:
        result = correct_result(job)
        check = result.check if kind == "simulator" else None
        return result.model_copy(
            update={
                "check": check,
                "roofline": None,
                "timing": TimingStage(timed=False, untimed_reason=reason),
                "system": SystemInfo(kind=kind, device="no GPU"),  # type: ignore[arg-type]
            }
        )

    return script


@pytest.mark.parametrize("executor", [FakeExecutor(script=untimed("simulator", "simulated"))])
def test_simulated_run_is_marked_untimed(client: TestClient) -> None:
    html = post(client).text
    assert "Correct" in html and "Untimed (simulated): simulated" in html
    assert 'step-skipped"><span class="step-dot" aria-hidden="true"></span>Time' in html
    assert "µs" not in html.split("Untimed")[1].split("run-details")[0]  # no time invented


@pytest.mark.parametrize("executor", [FakeExecutor(script=untimed("compile-only", "no GPU"))])
def test_compile_only_run_says_so(client: TestClient) -> None:
    html = post(client).text
    assert "Compiled, not run: no GPU" in html and "Correct" not in html
    assert 'step-skipped"><span class="step-dot" aria-hidden="true"></span>Check' in html


def only_compiled(job: RunJob) -> RunResult:
    """What the engine ends a CUDA C++ run with on a machine without a GPU."""
    return untimed("compile-only", "compiled, not run: this machine has no GPU")(job).model_copy(
        update={
            "state": RunState.compiled,
            "message": "Compiled, not checked: this machine has no GPU to run CUDA C++, so "
            "whether the kernel is right is not known.",
        }
    )


@pytest.mark.parametrize("executor", [FakeExecutor(script=only_compiled)])
def test_a_run_only_compiled_is_never_shown_as_correct(client: TestClient) -> None:
    html = post(client).text
    assert "Compiled, not checked" in html and "Correct" not in html
    assert "whether the kernel is right is not known" in html
    for step in ("Check", "Time"):
        assert f'step-skipped"><span class="step-dot" aria-hidden="true"></span>{step}' in html
    assert 'data-final="true"' in html


def hung_in_the_check(job: RunJob) -> RunResult:
    """What a worker ends a run with when its kernel loops forever in the check."""
    return RunResult(
        job_id=job.job_id,
        problem=job.problem,
        backend=job.backend,
        state=RunState.timeout,
        message="timed out after 30 s: the kernel or its launch did not finish (an endless "
        "loop, a deadlock, or far too much work), while checking the test cases",
        phase=RunState.checking,
    )


@pytest.mark.parametrize("executor", [FakeExecutor(script=hung_in_the_check)])
def test_a_timeout_marks_the_phase_it_hit(client: TestClient) -> None:
    html = post(client).text
    assert "Timed out" in html and "while checking the test cases" in html
    assert 'step-done"><span class="step-dot" aria-hidden="true"></span>Compile' in html
    assert 'step-failed"><span class="step-dot" aria-hidden="true"></span>Check' in html


def test_a_message_that_repeats_the_verdict_is_not_shown_twice() -> None:
    from kplay.app.db.models import Run
    from kplay.app.services.cards import build_card

    job = RunJob(problem="vector_add", backend="numba-cuda", source="x")
    reason = "ran in a simulator: checked for correctness, not timed"
    result = untimed("simulator", reason)(job).model_copy(
        update={"message": f"Correct. Untimed: {reason}."}
    )
    run = Run(
        id=job.job_id,
        user="u",
        problem=job.problem,
        backend=job.backend,
        source="x",
        state="done",
        result=result.model_dump(mode="json"),
    )
    card = build_card(run)
    assert card.verdict == "Correct" and card.message is None
    assert card.untimed == f"Untimed (simulated): {reason}"


@pytest.mark.parametrize("executor", [FakeExecutor(refuse="every worker is busy")])
def test_refused_run_gets_a_rejected_card(client: TestClient) -> None:
    html = post(client).text
    assert "Rejected" in html and "every worker is busy" in html and "hx-trigger" not in html


class Exploding(FakeExecutor):
    def submit(self, job: RunJob) -> None:
        raise ConnectionError("broker unreachable")


@pytest.mark.parametrize("executor", [Exploding()])
def test_crashed_submit_ends_with_a_verdict(client: TestClient) -> None:
    html = post(client).text
    assert "Runtime error" in html and "broker unreachable" in html and "hx-trigger" not in html


@pytest.mark.parametrize(
    ("fields", "status", "fragment"),
    [
        ({"source": "x" * 70000}, 413, "the limit is 65536 bytes"),
        ({"source": ""}, 422, "source is empty"),
        ({"backend": "cuda"}, 422, "not offered by cell"),
        ({"grid": "ceil_div(n"}, 422, "unbalanced parentheses"),
        ({"num_warps": "four"}, 422, "num_warps must be a whole number"),
        ({"constants": "BLOCK"}, 422, "expected NAME=value"),
    ],
)
def test_bad_input_gets_an_error_card(
    client: TestClient, executor: FakeExecutor, fields: dict, status: int, fragment: str
) -> None:
    reply = post(client, **fields)
    assert reply.status_code == status
    assert "data-input-error" in reply.text and fragment in reply.text
    assert "still in the editor" in reply.text and executor.jobs == []


def test_unknown_cell_and_run(client: TestClient) -> None:
    reply = client.post(
        "/cells/nope/runs", data={"backend": "numba-cpu", "source": "x"}, headers=PAGE
    )
    assert reply.status_code == 404 and "unknown cell &#39;nope&#39;" in reply.text
    card = client.get("/runs/feedface/card")
    assert card.status_code == 404 and 'data-final="true"' in card.text


def test_history_lists_attempts_with_diffs(client: TestClient, executor: FakeExecutor) -> None:
    post(client)
    executor.script = wrong_result
    post(client, source=SOURCE.replace("pass", "out[0] = 1.0"))
    html = client.get("/cells/ch01-vadd-cpu/history").text
    assert html.index("#2") < html.index("#1")
    assert "Wrong answer" in html and "Correct" in html
    assert html.count("data-load-run=") == 2
    assert '<span class="d-add">+    out[0] = 1.0</span>' in html
    assert '<span class="d-del">-    pass</span>' in html
    assert "+1" in html and "−1" in html
    assert client.get("/cells/nope/history").status_code == 404


def test_launch_form_fields_reach_the_job(client: TestClient, executor: FakeExecutor) -> None:
    reply = client.post(
        "/cells/ch02-vadd-gpu/runs",
        data={"backend": "triton", "source": SOURCE, "constants": "BLOCK=512", "num_warps": "8"},
        headers=PAGE,
    )
    assert reply.status_code == 201, reply.text
    launch = executor.jobs[0].launch
    assert launch is not None and launch.constants == {"BLOCK": "512"} and launch.num_warps == 8
    reply = client.post(
        "/cells/ch02-vadd-gpu/runs",
        data={"backend": "cuda", "source": SOURCE, "grid": "ceil_div(n, 128)", "block": "128"},
        headers=PAGE,
    )
    assert reply.status_code == 201
    assert executor.jobs[1].launch is not None and executor.jobs[1].launch.block == ["128"]


def test_runs_cannot_be_started_from_another_site(
    client: TestClient, executor: FakeExecutor
) -> None:
    data = {"backend": "numba-cpu", "source": SOURCE}
    assert client.post(CELL, data=data).status_code == 403  # a plain cross-site form
    headers = {**PAGE, "Sec-Fetch-Site": "cross-site"}
    assert client.post(CELL, data=data, headers=headers).status_code == 403
    assert executor.jobs == []
