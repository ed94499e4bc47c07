"""A suspicious run on the run card: named calmly, its reason shown, its seed not."""

from __future__ import annotations

from pathlib import Path

import pytest

from kplay.kernels import evaluate as ev
from kplay.kernels import perf
from kplay.kernels.models import RunJob, RunResult, RunState
from tests.kernels.slow_device import slow_device_ceilings

SOURCE = Path(__file__).resolve().parents[2] / (
    "kernels/problems/vector_add/solutions/correct/vector_add.numba_cpu.py"
)


@pytest.fixture(scope="module")
def suspicious() -> RunResult:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(perf, "ceilings_for_run", slow_device_ceilings)
        job = RunJob(
            problem="vector_add", backend="numba-cpu", source=SOURCE.read_text(), timing_cap_s=0.05
        )
        result = ev.evaluate(job)
    assert result.state is RunState.suspicious, result.message
    return result


def _run(result: RunResult):  # type: ignore[no-untyped-def]
    from kplay.app.db.models import Run

    return Run(
        id=result.job_id,
        user="reader",
        problem=result.problem,
        backend=result.backend,
        source=SOURCE.read_text(),
        state=result.state.value,
        detail=result.message,
        result=result.model_dump(mode="json"),
    )


def test_the_card_names_the_state_and_gives_the_reason(suspicious: RunResult) -> None:
    from kplay.app.services.cards import build_card

    card = build_card(_run(suspicious))
    assert card.final and card.verdict == "Faster than the device allows"
    assert card.tone == "warn"
    assert card.message and card.message.startswith("Timed at ")
    assert "no ranking takes it" in card.message
    assert [s.status for s in card.steps] == ["done", "done", "done", "failed"]
    assert card.headline and card.timing_rows  # what was measured stays on view
    seed = next(m for m in card.system_rows if m.label == "seed")
    assert seed.value == "secret, drawn for this run"


def test_the_card_renders(suspicious: RunResult) -> None:
    from kplay.app.render import make_templates
    from kplay.app.services.cards import build_card

    card = build_card(_run(suspicious))
    html = make_templates().env.get_template("fragments/run_card.html").render(card=card)
    assert 'data-state="suspicious"' in html and 'data-final="true"' in html
    assert "Faster than the device allows" in html and "verdict-warn" in html
