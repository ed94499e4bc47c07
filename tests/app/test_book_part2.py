"""Part II of the book (the GEMM ladder): chapters render, cells and figures exist,
every measured number is a placeholder the ladder's bench script fills."""

from __future__ import annotations

import importlib.util
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
STATIC_BOOK = ROOT / "static" / "book"
SGEMM_CORRECT = ROOT / "kernels" / "problems" / "sgemm" / "solutions" / "correct"
PLACEHOLDER = re.compile(r"\[\[bench:([A-Za-z0-9_]+)\.([A-Za-z0-9_]+)\.([A-Za-z0-9_]+)\]\]")
FIGURE = re.compile(r"!\[[^\]]+\]\((/static/book/[^)]+)\)")
ROW_FIELDS = {
    "median_us",
    "iqr_us",
    "reps",
    "gflops",
    "tflops",
    "percent_of_cublas",
    "percent_of_roofline",
    "registers",
    "device",
    "date",
    "commit",
}
META_FIELDS = {"device", "date", "commit", "cuda", "driver", "command", "case"}
# The exercises whose reference solution is a rung of the FP32 ladder, and that rung.
LADDER_EXERCISES = {
    "gemm_coalesce": "gemm_02_coalesced.cu",
    "gemm_smem_tiling": "gemm_03_smem_tiling.cu",
    "gemm_blocktile_2d": "gemm_05_blocktile_2d.cu",
    "gemm_vectorized": "gemm_06_vectorized.cu",
    "gemm_warptile": "gemm_07_warptile.cu",
}


def _ladder_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gemm_ladder", ROOT / "bench" / "gemm_ladder.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def part2() -> list[Chapter]:
    book = Book(Settings().book_dir, load_catalog())
    return [c for c in book.chapters() if c.part == 2]


def test_part2_has_the_ladder_chapters_in_order(part2: list[Chapter]) -> None:
    slugs = [c.slug for c in part2]
    assert slugs[0] == "gemm-naive" and slugs[-1] == "gemm-ladder"
    assert {"gemm-smem-tiling", "gemm-warptiling", "gemm-wmma"} <= set(slugs)
    assert len({c.part_title for c in part2}) == 1
    assert part2[0].part_title == "The GEMM worklog: naive to cuBLAS"


def test_part2_chapters_render_through_the_app(client: TestClient, part2: list[Chapter]) -> None:
    for chapter in part2:
        page = client.get(chapter.url)
        assert page.status_code == 200, chapter.slug
        html = page.text
        assert chapter.title.split(" — ")[0] in html
        for cell in chapter.cells:
            assert f'data-cell="{cell.id}"' in html
        assert "What the roofline says" in html and "Further reading" in html


def test_part2_cells_name_real_problems_and_backends(part2: list[Chapter]) -> None:
    catalog = load_catalog()
    problems = set()
    for chapter in part2:
        assert chapter.cells, f"{chapter.slug} has no kernel cell"
        for cell in chapter.cells:
            spec = catalog[cell.problem]
            assert set(cell.backends) <= set(spec.backends)
            assert spec.starter(cell.backend).strip()
            problems.add(cell.problem)
    # Every guided exercise is placed in the chapters.
    exercises = {"hgemm_wmma", *LADDER_EXERCISES}
    assert exercises <= problems
    assert all(catalog[slug].exercise for slug in exercises)


def test_part2_figures_exist_and_suit_both_themes(part2: list[Chapter]) -> None:
    seen = set()
    for chapter in part2:
        text = chapter.path.read_text(encoding="utf-8")
        for url in FIGURE.findall(text):
            seen.add(url)
            path = ROOT / url.lstrip("/")
            assert path.is_file(), f"{chapter.path.name} shows missing figure {url}"
            svg = path.read_text(encoding="utf-8")
            xml.dom.minidom.parseString(svg)  # well-formed
            assert "currentColor" in svg
            assert not re.search(r'fill="(#fff|#ffffff|white|black|#000)"', svg, re.I)
    assert "/static/book/gemm_ladder.svg" in seen


def test_every_measured_number_is_a_known_placeholder(part2: list[Chapter]) -> None:
    ladder = _ladder_module()
    rows = {name for name, _ in ladder.ladder_files()} | {n for n, _ in ladder.WMMA_ROWS}
    rows |= {"cublas", "cublas_fp16"}
    found = 0
    for chapter in part2:
        for file, row, field in PLACEHOLDER.findall(chapter.path.read_text(encoding="utf-8")):
            found += 1
            assert file == "gemm_ladder", f"{chapter.path.name}: unknown results file {file}"
            if row == "meta":
                assert field in META_FIELDS, f"{chapter.path.name}: meta.{field}"
            else:
                assert row in rows, f"{chapter.path.name}: unknown row {row}"
                assert field in ROW_FIELDS, f"{chapter.path.name}: unknown field {field}"
    assert found > 20


def test_the_ladder_has_seven_fp32_steps_and_the_exercise_matches_step_3() -> None:
    names = [name for name, _ in _ladder_module().ladder_files()]
    assert names == [
        "01_naive",
        "02_coalesced",
        "03_smem_tiling",
        "04_blocktile_1d",
        "05_blocktile_2d",
        "06_vectorized",
        "07_warptile",
    ]
    exercise = load_catalog()["gemm_smem_tiling"].solutions("correct")
    assert [p.name for _, p in exercise] == ["gemm_03_smem_tiling.cu"]
    assert exercise[0][1] == (SGEMM_CORRECT / "gemm_03_smem_tiling.cu").resolve()


@pytest.mark.parametrize("slug", sorted(LADDER_EXERCISES))
def test_ladder_exercise_reference_is_the_measured_rung(slug: str) -> None:
    spec = load_catalog()[slug]
    assert spec.exercise and spec.backends == ["cuda"]
    rung = LADDER_EXERCISES[slug]
    correct = spec.solutions("correct")
    assert [p.name for _, p in correct] == [rung]
    assert correct[0][1] == (SGEMM_CORRECT / rung).resolve()  # the rung's one copy
    assert spec.solutions("wrong"), f"{slug} has no wrong solution"
    starter = spec.starter("cuda")
    assert "TODO" in starter and "kplay:" in starter
    assert all(t.percent_of_baseline for t in spec.tiers)


def test_ladder_chart_and_table_draw_with_and_without_results() -> None:
    ladder = _ladder_module()
    empty = ladder.chart_svg({})
    xml.dom.minidom.parseString(empty)
    assert "not yet measured" in empty and "currentColor" in empty
    rows = {
        "07_warptile": {"state": "done", "percent_of_cublas": 91.5, "tflops": 44.1, "gflops": 44},
        "cublas": {"state": "done", "percent_of_cublas": 100.0, "tflops": 48.2, "gflops": 48},
        "meta": {"device": "a GPU", "case": "M = N = K = 4096", "date": "2000-01-01"},
    }
    drawn = ladder.chart_svg(rows)
    xml.dom.minidom.parseString(drawn)
    assert "91.5%" in drawn and "44.1 TFLOP/s" in drawn and "a GPU" in drawn
    table = ladder.markdown_table(rows)
    assert "| 7 warptiling | done |" in table and "| 44 |" in table


def test_committed_ladder_chart_is_the_one_the_script_draws() -> None:
    ladder = _ladder_module()
    results = ROOT / "bench" / "results" / "gemm_ladder.json"
    data = {}
    if results.is_file():
        import json

        data = json.loads(results.read_text())
    assert (STATIC_BOOK / "gemm_ladder.svg").read_text() == ladder.chart_svg(data)
