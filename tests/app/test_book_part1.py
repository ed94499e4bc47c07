"""Part I of the book ("Parallelism, from the CPU up"): chapters render through the app, every
cell names a real problem and backend, the exercises are placed and match the kernels the
chapters report, figures suit both themes, and every measured number is a placeholder that
bench/part1.py fills."""

from __future__ import annotations

import importlib.util
import json
import re
import xml.dom.minidom
from pathlib import Path
from types import ModuleType

import pytest
from fastapi.testclient import TestClient

from kplay.app.book import Book, Chapter
from kplay.config import Settings
from kplay.kernels.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[2]
PLACEHOLDER = re.compile(r"\[\[bench:([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\]\]")
FIGURE = re.compile(r"!\[[^\]]+\]\((/static/book/[^)]+)\)")
EXERCISES = {
    "cpu_triad",
    "cpu_fma_peak",
    "cpu_simd_sum",
    "cpu_parallel_sum",
    "transpose_smem",
    "reduce_warp_shuffle",
}
# Fields each kind of row may carry (see bench/part1.py).
CPU_FIELDS = {
    "gbs",
    "gflops",
    "median_us",
    "fastest_us",
    "slowest_us",
    "spread_percent",
    "runs",
    "threads",
    "percent_of_roofline",
    "percent_of_read",
    "percent_of_one_core_read",
    "percent_of_copy",
}
CPU_CEILING_FIELDS = {
    "copy_gbs",
    "read_gbs",
    "read_gbs_one_core",
    "fp32_gflops",
    "ridge_flops_per_byte",
}
GPU_FIELDS = {
    "gbs",
    "percent_of_copy",
    "percent_of_roofline",
    "median_us",
    "iqr_us",
    "reps",
    "registers",
}
GPU_CEILING_FIELDS = {"copy_gbs", "fp32_gflops", "ridge_flops_per_byte", "source"}


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("part1_bench", ROOT / "bench" / "part1.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def part1() -> list[Chapter]:
    book = Book(Settings().book_dir, load_catalog())
    return [c for c in book.chapters() if c.part == 1]


def test_part1_runs_from_the_cpu_up_in_order(part1: list[Chapter]) -> None:
    slugs = [c.slug for c in part1]
    assert slugs == [
        "first-kernel-cpu",
        "roofline",
        "ilp-simd",
        "cpu-threads",
        "first-gpu-kernel",
        "transpose",
        "reductions",
    ]
    assert [c.number for c in part1] == [str(n) for n in range(1, 8)]
    assert {c.part_title for c in part1} == {"Parallelism, from the CPU up"}


def test_part1_has_every_cpu_only_chapter_before_the_first_gpu_one(part1: list[Chapter]) -> None:
    """The part's title and the introduction promise the CPU first: a chapter whose cells
    offer only the CPU backend never follows one whose cells offer a GPU backend."""
    cpu_only = [all(b == "numba-cpu" for cell in c.cells for b in cell.backends) for c in part1]
    first_gpu = cpu_only.index(False)
    assert first_gpu >= 3, "the CPU half is the roofline, one core and many cores"
    assert not any(cpu_only[first_gpu:]), [c.slug for c in part1]


def test_part1_chapters_render_through_the_app(client: TestClient, part1: list[Chapter]) -> None:
    for chapter in part1:
        page = client.get(chapter.url)
        assert page.status_code == 200, chapter.slug
        html = page.text
        assert chapter.cells, f"{chapter.slug} has no kernel cell"
        for cell in chapter.cells:
            assert f'data-cell="{cell.id}"' in html
        for heading in ("In this chapter you will", "What the roofline says", "Further reading"):
            assert heading in html, f"{chapter.slug}: no {heading!r}"
        # Placeholders never reach the reader raw: a value or "(not yet measured)".
        assert "[[bench:" not in html


def test_part1_cells_name_real_problems_and_backends(part1: list[Chapter]) -> None:
    catalog = load_catalog()
    placed = set()
    for chapter in part1:
        for cell in chapter.cells:
            spec = catalog[cell.problem]
            assert cell.backend in cell.backends
            assert set(cell.backends) <= set(spec.backends)
            for backend in cell.backends:
                assert spec.starter(backend).strip()
            placed.add(cell.problem)
    assert placed >= EXERCISES
    for slug in EXERCISES:
        assert catalog[slug].exercise, f"{slug} should be marked exercise = true"


def test_the_exercises_offer_only_the_backends_that_make_sense() -> None:
    catalog = load_catalog()
    for slug in ("cpu_triad", "cpu_fma_peak", "cpu_simd_sum", "cpu_parallel_sum"):
        assert catalog[slug].backends == ["numba-cpu"]
    for slug in ("transpose_smem", "reduce_warp_shuffle"):
        assert catalog[slug].backends == ["cuda"]


def test_exercise_references_are_the_kernels_the_chapters_report() -> None:
    catalog = load_catalog()
    smem = [p.name for _, p in catalog["transpose_smem"].solutions("correct")]
    assert smem == ["transpose_tiled_padded.cu"]
    # One copy: the exercise borrows the file the transpose chapter measures.
    ours = catalog["transpose_smem"].solution_path("correct", smem[0])
    assert ours == catalog["transpose"].solution_path("correct", smem[0])
    bench = _bench()
    gpu_rows = {row: (problem, file) for row, problem, file, _ in bench.GPU_ROWS}
    assert gpu_rows["transpose_smem"] == ("transpose_smem", "transpose_tiled_padded.cu")
    assert gpu_rows["sum_warp_shuffle"] == ("reduce_warp_shuffle", "reduce_warp_shuffle.cu")
    cpu_rows = {row: (problem, stem) for row, problem, stem, _ in bench.CPU_ROWS}
    assert cpu_rows["triad_parallel"] == ("cpu_triad", "triad_parallel")
    assert cpu_rows["fma_blocked_parallel"] == ("cpu_fma_peak", "fma_blocked_parallel")
    assert cpu_rows["simd_sum_fastmath"] == ("cpu_simd_sum", "sum_fastmath")
    # Every row the bench measures names a solution that exists.
    for row, problem, file, _ in bench.GPU_ROWS:
        assert catalog[problem].solution_path("correct", file).is_file(), row
    for row, problem, stem, _ in bench.CPU_ROWS:
        assert catalog[problem].solution_path("correct", stem + bench.CPU_SUFFIX).is_file(), row


def test_part1_figures_exist_and_suit_both_themes(part1: list[Chapter]) -> None:
    seen = set()
    for chapter in part1:
        for url in FIGURE.findall(chapter.path.read_text(encoding="utf-8")):
            seen.add(url)
            path = ROOT / url.lstrip("/")
            assert path.is_file(), f"{chapter.path.name} shows missing figure {url}"
            svg = path.read_text(encoding="utf-8")
            xml.dom.minidom.parseString(svg)
            assert "currentColor" in svg and "<title>" in svg
            assert not re.search(r'fill="(#fff|#ffffff|white|black|#000)"', svg, re.I)
            assert "background" not in svg
    assert len(seen) >= 8


def test_every_measured_number_is_a_known_placeholder(part1: list[Chapter]) -> None:
    bench = _bench()
    cpu_rows = {row for row, *_ in bench.CPU_ROWS}
    gpu_rows = {row for row, *_ in bench.GPU_ROWS} | set(bench.GPU_BASELINES)
    found = 0
    for chapter in part1:
        for file, row, field in PLACEHOLDER.findall(chapter.path.read_text(encoding="utf-8")):
            found += 1
            where = f"{chapter.path.name}: {file}.{row}.{field}"
            if file == "part1_cpu":
                if row == "ceilings":
                    assert field in CPU_CEILING_FIELDS, where
                else:
                    assert row in cpu_rows and field in CPU_FIELDS, where
            else:
                assert file == "part1", where
                if row == "ceilings":
                    assert field in GPU_CEILING_FIELDS, where
                elif row == "copy":
                    assert field == "gbs", where
                else:
                    assert row in gpu_rows and field in GPU_FIELDS, where
    assert found > 40


def test_committed_cpu_results_have_every_row_the_chapters_quote(part1: list[Chapter]) -> None:
    results = ROOT / "bench" / "results" / "part1_cpu.json"
    if not results.is_file():
        pytest.skip("bench/results/part1_cpu.json has not been produced yet")
    data = json.loads(results.read_text())
    assert {"meta", "ceilings"} <= set(data)
    for chapter in part1:
        for file, row, field in PLACEHOLDER.findall(chapter.path.read_text(encoding="utf-8")):
            if file == "part1_cpu":
                assert field in data[row], f"{chapter.path.name}: {row}.{field} not measured"


def test_markdown_table_lists_rows_and_skips_meta() -> None:
    bench = _bench()
    rows = {
        "meta": {"device": "a CPU"},
        "ceilings": {"copy_gbs": 10.0},
        "simd_sum_fastmath": {"state": "done", "gbs": 31.5, "percent_of_read": 88.0},
    }
    table = bench.markdown_table(rows)
    assert "| simd_sum_fastmath | done |" in table and "88.0" in table
    assert "a CPU" not in table


def test_gpu_measurement_writes_every_row_the_chapters_quote(
    monkeypatch: pytest.MonkeyPatch, part1: list[Chapter]
) -> None:
    """The GPU half of the bench, with the engine and the device replaced by fakes: every row
    and field a chapter quotes from part1.json comes out of measure_gpu."""
    import kplay.kernels.sysinfo
    from kplay.kernels.models import (
        CompileStage,
        Resources,
        RooflineStage,
        RunResult,
        RunState,
        TimingStage,
    )

    bench = _bench()

    def fake_evaluate(
        problem: str, backend: str, file: str, cap_s: float, benchmark: str | None = None
    ) -> RunResult:
        return RunResult(
            job_id="fake",
            problem=problem,
            backend=backend,
            state=RunState.done,
            compile=CompileStage(
                ok=True, resources=[Resources(registers=16, spill_stores_bytes=0)]
            ),
            timing=TimingStage(timed=True, case="bench", median_us=100.0, iqr_us=1.0, reps=10),
            roofline=RooflineStage(
                flops=0.0,
                bytes=3.0e8,
                intensity_flops_per_byte=0.0,
                achieved_flops_per_s=0.0,
                achieved_bytes_per_s=3.0e12,
                memory_ceiling_bytes_per_s=4.0e12,
                compute_ceiling_flops_per_s=6.0e13,
                compute_ceiling_name="FP32",
                ridge_flops_per_byte=15.0,
                bound="memory",
                attainable_flops_per_s=0.0,
                percent_of_roofline=75.0,
                ceilings_source="calibrated",
                device="NVIDIA H200",
                baseline_median_us=120.0,
            ),
        )

    monkeypatch.setattr(bench, "_evaluate", fake_evaluate)
    monkeypatch.setattr(bench, "copy_bandwidth", lambda: 4.0e12)
    facts = {"device": "NVIDIA H200", "cuda": "13.0", "driver": "13.0"}
    monkeypatch.setattr(kplay.kernels.sysinfo, "gpu_facts", lambda: facts)
    rows = bench.measure_gpu(1.0, log=lambda _msg: None)
    assert rows["copy"]["gbs"] == 4000.0
    assert rows["transpose_naive"]["percent_of_copy"] == 75.0
    assert rows["sum_baseline"]["gbs"] == 2500.0  # 3e8 bytes in 120 µs
    for chapter in part1:
        for file, row, field in PLACEHOLDER.findall(chapter.path.read_text(encoding="utf-8")):
            if file == "part1":
                assert field in rows[row], f"{chapter.path.name}: {row}.{field} never written"
