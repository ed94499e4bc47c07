"""The run card reads the roofline stage honestly."""

from __future__ import annotations


def test_a_run_above_the_memory_roof_is_explained() -> None:
    from kplay.app.services.cards import _bound_note
    from kplay.kernels.models import RooflineStage

    common = dict(
        flops=1.0,
        bytes=12.0,
        intensity_flops_per_byte=1 / 12,
        achieved_flops_per_s=1.0,
        achieved_bytes_per_s=1.0,
        memory_ceiling_bytes_per_s=1.0,
        compute_ceiling_flops_per_s=1.0,
        compute_ceiling_name="FP32",
        ridge_flops_per_byte=1.0,
        attainable_flops_per_s=1.0,
        ceilings_source="calibrated",
        device="cpu",
    )
    above = RooflineStage(bound="memory", percent_of_roofline=254.0, **common)
    under = RooflineStage(bound="memory", percent_of_roofline=80.0, **common)
    assert "cache" in _bound_note(above)
    assert _bound_note(under) == "memory-bound"


def _cpu_run(problem: str, case: str, nbytes: float, llc: int, level: str = "DRAM"):  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime

    from kplay.app.db.models import Run
    from kplay.kernels.models import RooflineStage, RunResult, RunState, TimingStage

    roof = RooflineStage(
        flops=nbytes / 12,
        bytes=nbytes,
        intensity_flops_per_byte=1 / 12,
        achieved_flops_per_s=2e9,
        achieved_bytes_per_s=24e9,
        memory_ceiling_bytes_per_s=40e9,
        compute_ceiling_flops_per_s=100e9,
        compute_ceiling_name="FP32",
        ridge_flops_per_byte=2.5,
        bound="memory",
        attainable_flops_per_s=40e9 / 12,
        percent_of_roofline=60.0,
        ceilings_source="calibrated",
        device="AMD EPYC",
        memory_level=level,
        llc_bytes=llc,
    )
    result = RunResult(
        job_id="r1",
        problem=problem,
        backend="numba-cpu",
        state=RunState.done,
        timing=TimingStage(timed=True, case=case, median_us=5000.0, reps=10),
        roofline=roof,
    )
    return Run(
        id="r1",
        user="u",
        problem=problem,
        backend="numba-cpu",
        source="",
        state="done",
        created_at=datetime(2026, 12, 3, tzinfo=UTC),
        result=result.model_dump(mode="json"),
    )


def _rows(run) -> dict[str, tuple[str, str]]:  # type: ignore[no-untyped-def]
    from kplay.app.services.cards import build_card

    card = build_card(run)
    rows = {m.label: (m.value, m.note) for m in card.roofline_rows}
    rows["of roofline"] = next((m.value, m.note) for m in card.headline if m.label == "of roofline")
    return rows


def test_a_cpu_card_says_where_the_roof_and_the_case_live() -> None:
    mib = 2**20
    rows = _rows(_cpu_run("vector_add", "4x the last-level cache", 128 * mib, 32 * mib))
    assert rows["memory roof"] == ("40.0 GB/s", "measured in DRAM")
    assert rows["case lives in"] == (
        "DRAM: 4.00× the 32.0 MiB last-level cache",
        "128 MiB, 4.00× the 32.0 MiB last-level cache",
    )
    assert rows["of roofline"][1] == "memory-bound, against the DRAM roof"


def test_a_capped_cpu_case_says_a_cache_may_serve_it() -> None:
    mib = 2**20
    run = _cpu_run("vector_add", "4x the last-level cache", 512 * mib, 256 * mib)
    where, note = _rows(run)["case lives in"]
    assert where.startswith("DRAM and partly the last-level cache: a cap stopped the case at 2.00×")
    assert note == "512 MiB, 2.00× the 256 MiB last-level cache"


def test_a_cpu_case_kept_in_a_cache_shows_the_level_it_states() -> None:
    from kplay.kernels.catalog import get_problem

    case = next(c for c in get_problem("sgemm").benchmarks if c.measures)
    where, note = _rows(_cpu_run("sgemm", case.name, 768 * 2**10, 32 * 2**20))["case lives in"]
    assert where == case.measures and where.startswith("the L2 and last-level caches")
    assert note == "768 KiB, within the 32.0 MiB last-level cache"


def test_a_wrong_2d_output_shows_its_map_on_the_card() -> None:
    from datetime import UTC, datetime
    from pathlib import Path

    from kplay.app.db.models import Run
    from kplay.app.render import make_templates
    from kplay.app.services.cards import build_card
    from kplay.kernels.catalog import PROBLEMS_DIR
    from kplay.kernels.evaluate import evaluate
    from kplay.kernels.models import RunJob, RunState

    path = Path(PROBLEMS_DIR) / "transpose/solutions/wrong/transpose_copies_row_major.numba_cpu.py"
    job = RunJob(
        problem="transpose", backend="numba-cpu", source=path.read_text(), mode="check", seed=1
    )
    result = evaluate(job)
    assert result.state is RunState.wrong
    run = Run(
        id="r2",
        user="u",
        problem="transpose",
        backend="numba-cpu",
        source=job.source,
        state="wrong",
        created_at=datetime(2026, 12, 3, tzinfo=UTC),
        result=result.model_dump(mode="json"),
    )
    card = build_card(run)
    html = make_templates().env.get_template("fragments/run_card.html").render(card=card)
    assert "Where case 17x33 is wrong" in html
    assert "out rows 0-7, columns 0-7 (. right, x wrong value" in html
    assert "0 . x x x x x x x" in html


def test_a_run_timed_by_its_kernels_stamps_shows_the_events_beside_them() -> None:
    from kplay.app.services.cards import build_card
    from kplay.kernels.models import RunResult

    run = _cpu_run("vector_add", "n=1", 12e6, 32 * 2**20)
    plain = {m.label for m in build_card(run).timing_rows}
    assert "events' median" not in plain
    result = RunResult.model_validate(run.result)
    assert result.timing is not None
    stamped = result.timing.model_copy(
        update={"timer": "cupti-kernels", "events_median_us": 5300.0}
    )
    run.result = result.model_copy(update={"timing": stamped}).model_dump(mode="json")
    rows = {m.label: m.value for m in build_card(run).timing_rows}
    assert rows["timer"] == "cupti-kernels"
    assert (rows["median"], rows["events' median"]) == ("5.00 ms", "5.30 ms")
