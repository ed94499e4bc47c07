"""Part III of the book, chapters 1-3 (profiling, softmax, fused row kernels): they render
through the app, every cell names a real problem and backend, figures suit both themes, every
placeholder resolves to a recorded result, the figures quoted from bench/RESULTS.md's Part III
run are that run's, and the figures the chapters compute from recorded measurements agree with
those measurements."""

from __future__ import annotations

import json
import math
import re
import xml.dom.minidom
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from kplay.app.benchrefs import MISSING, lookup
from kplay.app.book import Book, Chapter
from kplay.config import Settings
from kplay.kernels.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
PLACEHOLDER = re.compile(r"\[\[bench:([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\]\]")
FIGURE = re.compile(r"!\[[^\]]+\]\((/static/book/[^)]+)\)")
SLUGS = ["profiling", "softmax", "fused-rows"]
# The problems each chapter must embed (a chapter may embed more).
EMBEDS = {
    "profiling": {"sgemm", "hgemm_wmma"},
    "softmax": {"softmax"},
    "fused-rows": {"rmsnorm_channels", "layernorm", "bias_gelu"},
}
SECTIONS = ["In this chapter you will", "Exercise", "What the roofline says", "Further reading"]


@pytest.fixture(scope="module")
def chapters() -> dict[str, Chapter]:
    book = Book(Settings().book_dir, load_catalog())
    found = {c.slug: c for c in book.chapters() if c.part == 3 and c.slug in SLUGS}
    return found


def _text(chapter: Chapter) -> str:
    return chapter.path.read_text(encoding="utf-8")


def test_the_first_three_chapters_open_part3_in_order(chapters: dict[str, Chapter]) -> None:
    assert list(chapters) == SLUGS
    numbers = [int(chapters[s].number) for s in SLUGS]
    assert numbers == list(range(1, len(SLUGS) + 1))
    assert {c.part_title for c in chapters.values()} == {"Attention and profiling"}


def test_chapters_render_through_the_app(client: TestClient, chapters: dict[str, Chapter]) -> None:
    for chapter in chapters.values():
        page = client.get(f"/book/p3/{chapter.slug}")
        assert page.status_code == 200, chapter.slug
        html = page.text
        assert chapter.title in html
        for cell in chapter.cells:
            assert f'data-cell="{cell.id}"' in html
        for heading in SECTIONS:
            assert heading in html, f"{chapter.slug} lacks {heading!r}"
        assert MISSING not in html, f"{chapter.slug} shows an unresolved placeholder"


def test_cells_name_real_problems_and_backends(chapters: dict[str, Chapter]) -> None:
    catalog = load_catalog()
    for slug, chapter in chapters.items():
        problems = {cell.problem for cell in chapter.cells}
        assert EMBEDS[slug] <= problems, slug
        for cell in chapter.cells:
            assert cell.id.startswith("p3-"), cell.id
            spec = catalog[cell.problem]
            assert cell.backend in spec.backends
            assert set(cell.backends) <= set(spec.backends)
            assert spec.starter(cell.backend).strip()


def test_figures_exist_are_accessible_and_suit_both_themes(
    chapters: dict[str, Chapter],
) -> None:
    for number, slug in enumerate(SLUGS, start=1):
        urls = FIGURE.findall(_text(chapters[slug]))
        own = [u for u in urls if Path(u).name.startswith(f"p3-{number:02d}-")]
        assert own, f"{slug} shows no figure of its own"
        for url in urls:
            path = ROOT / url.lstrip("/")
            assert path.is_file(), f"{slug} shows missing figure {url}"
            svg = path.read_text(encoding="utf-8")
            root = xml.dom.minidom.parseString(svg).documentElement
            assert root.getAttribute("role") == "img" and root.getAttribute("aria-label")
            assert root.getElementsByTagName("title")
            assert "currentColor" in svg
            assert not re.search(r'(fill|stroke)="(#fff|#ffffff|white|black|#000)"', svg, re.I)


def test_every_placeholder_resolves_to_a_recorded_value(chapters: dict[str, Chapter]) -> None:
    for chapter in chapters.values():
        for file, row, field in PLACEHOLDER.findall(_text(chapter)):
            value = lookup(RESULTS, file, row, field)
            assert value != MISSING, f"{chapter.slug}: {file}.{row}.{field} is not recorded"


def test_cell_ids_are_unique_within_these_chapters(chapters: dict[str, Chapter]) -> None:
    ids = [cell.id for c in chapters.values() for cell in c.cells]
    assert len(ids) == len(set(ids))


# --- figures the chapters compute from recorded measurements --------------------------------


def _ceilings() -> dict:
    return json.loads((RESULTS / "ceilings_h200.json").read_text())


def test_the_tensor_core_ridge_is_computed_from_the_recorded_ceilings(
    chapters: dict[str, Chapter],
) -> None:
    c = _ceilings()
    bf16, read, copy = (
        c[k] for k in ("bf16_tc_flops_per_s", "read_bytes_per_s", "copy_bytes_per_s")
    )
    text = _text(chapters["profiling"])
    rows = {
        (round(bf16 / 1e12), f"read, {read / 1e12:.2f} TB/s"): round(bf16 / read),
        (round(bf16 / 1e12), f"copy, {copy / 1e12:.2f} TB/s"): round(bf16 / copy),
    }
    for (peak, roof), ridge in rows.items():
        line = f"| BF16 tensor, {peak} TFLOP/s | {roof}"
        assert line in text, line
        stated = text.split(line, 1)[1].split("\n", 1)[0]
        assert stated.rstrip(" |").endswith(f"| {ridge}"), (line, stated)
    assert "| BF16 tensor, datasheet 989 TFLOP/s | datasheet 4.8 TB/s | 206 |" in text
    assert round(989 / 4.8) == 206


def _counter(text: str, kernel: str, name: str) -> tuple[str, float]:
    """The first value of a counter in the first block of `kernel` in an ncu text dump."""
    block = text.split(f"  {kernel} (", 1)[1]
    line = next(ln for ln in block.splitlines() if ln.strip().startswith(name))
    parts = line.split()
    return parts[-2] if len(parts) > 2 else "", float(parts[-1].replace(",", ""))


def test_the_hierarchical_roofline_points_follow_the_profiled_counters(
    chapters: dict[str, Chapter],
) -> None:
    dump = (RESULTS / "gemm_stalls_h200_cacca22.txt").read_text()
    text = _text(chapters["profiling"])
    assert "gemm_stalls_h200_cacca22.txt" in text
    flops = 2 * 4096**3
    points = {}
    for kernel in ("sgemm", "hgemm"):
        _, wavefronts = _counter(dump, kernel, "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum")
        unit, l2 = _counter(dump, kernel, "lts__t_bytes.sum.per_second")
        assert unit == "Tbyte/s"
        unit, duration = _counter(dump, kernel, "Duration")
        seconds = duration * {"ms": 1e-3, "us": 1e-6}[unit]
        points[kernel] = (wavefronts * 128, l2 * 1e12 * seconds)
    (s7, l7), (sw, lw) = points["sgemm"], points["hgemm"]
    smem_row = f"| {s7 / 1e9:.1f} GB | {flops / s7:.1f} | {sw / 1e9:.2f} GB | {flops / sw:.0f} |"
    l2_row = f"| {l7 / 1e9:.2f} GB | {flops / l7:.0f} | {lw / 1e9:.2f} GB | {flops / lw:.0f} |"
    assert smem_row in text, smem_row
    assert l2_row in text, l2_row
    dram = 4 * 3 * 4096**2, 2 * 2 * 4096**2 + 4 * 4096**2
    assert f"| {dram[0] / 1e6:.0f} MB | {flops / dram[0]:.0f} |" in text
    assert f"| {dram[1] / 1e6:.0f} MB | {flops / dram[1]:,.0f} |" in text


def test_the_float32_exp_thresholds_quoted_are_the_formats_own(
    chapters: dict[str, Chapter],
) -> None:
    text = _text(chapters["softmax"])
    big = math.log(float(np.finfo(np.float32).max))
    assert f"{big:.2f}" in text  # 88.72: exp overflows float32 above it
    with np.errstate(over="ignore"):
        assert np.isinf(np.exp(np.float32(big + 0.01)))
        assert np.isfinite(np.exp(np.float32(big - 0.01)))
    smallest = math.log(2.0**-149)  # the smallest float32 subnormal
    assert f"{smallest:.1f}" in text  # -103.3: exp underflows to zero below it


def test_every_solution_file_a_chapter_names_is_shipped(chapters: dict[str, Chapter]) -> None:
    """A chapter that asks the reader to run or predict a named solution must name a real one."""
    catalog = load_catalog()
    named = re.compile(r"`([a-z0-9_]+(?:\.[a-z_]+)?\.(?:cu|py))`")
    for chapter in chapters.values():
        shipped: set[str] = set()
        for problem in {cell.problem for cell in chapter.cells}:
            spec = catalog[problem]
            for kind in ("correct", "wrong"):
                shipped |= {path.name for _, path in spec.solutions(kind)}
        for name in named.findall(_text(chapter)):
            assert name in shipped, f"{chapter.slug} names {name}, which no embedded problem ships"


def test_the_fused_rows_chapter_states_the_formats_and_formulas_own_figures(
    chapters: dict[str, Chapter],
) -> None:
    text = _text(chapters["fused-rows"])
    # Neighbouring float32 values near 1e8 are 8 apart: the variance example's unit.
    assert float(np.spacing(np.float32(1e8))) == 8.0
    assert "near 10⁸, where neighbouring float32 numbers are 8 apart" in text
    # The erf and tanh forms of GELU differ by at most about 5e-4, near |t| = 2.7.
    ts = np.linspace(-8.0, 8.0, 160001)
    exact = np.array([0.5 * t * (1.0 + math.erf(t / math.sqrt(2.0))) for t in ts])
    approx = 0.5 * ts * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (ts + 0.044715 * ts**3)))
    gap = np.abs(exact - approx)
    assert round(float(gap.max()) * 1e4) == 5 and round(abs(float(ts[gap.argmax()])), 1) == 2.7
    assert "up to about 5 × 10⁻⁴ (near |`t`| = 2.7)" in text
    # The byte counts of the figure and of the prose agree: 4 bytes per read or write.
    unfused_layernorm = 4 * (1 + 2 + 1 + 2 + 2)
    assert unfused_layernorm == 32 and "Thirty-two bytes an element" in text
    svg = (ROOT / "static" / "book" / "p3-03-fusion-bytes.svg").read_text(encoding="utf-8")
    for total in (16, 8, unfused_layernorm):
        assert f">{total} B<" in svg


PART3_RUN = "## 2026-12-04 — H200: Part III kernels (attention, softmax, LayerNorm, bias + GELU)"


def test_row_kernel_figures_in_the_chapters_are_the_recorded_ones(
    chapters: dict[str, Chapter],
) -> None:
    """The figures chapters 2 and 3 quote from the Part III run are that run's rows."""
    text = (ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    section = text.split(PART3_RUN, 1)[1].split("\n## ", 1)[0]
    row = re.compile(r"^\| `([\w.]+)`[^|]*\| \w+ \| ([\d.]+) \| (\d+) \| \**([\d.]+)\** \|", re.M)
    rows = {m[1]: (m[2], m[3], m[4]) for m in row.finditer(section)}
    softmax = _text(chapters["softmax"])
    for name in ("softmax_one_read.cu", "softmax_online.cu", "softmax_one_read.triton.py",
                 "softmax_online.triton.py"):  # fmt: skip
        _, gbs, share = rows[name]
        assert re.search(rf"^\| `{re.escape(name)}` \| \w+ \| {gbs} \| {share} \|$", softmax, re.M)
    fused = " ".join(_text(chapters["fused-rows"]).split())
    us, _, share = rows["layernorm.cu"]
    assert f"`layernorm.cu` ran in {us} µs" in fused and f"{share}% of the calibrated" in fused
    us, _, share = rows["layernorm.triton.py"]
    assert f"`layernorm.triton.py` in {us} µs, {share}%" in fused
    for name in ("bias_gelu.cu", "bias_gelu.triton.py"):
        _, gbs, share = rows[name]
        assert re.search(rf"`{re.escape(name)}`( ran)? at {gbs} GB/s, {share}%", fused), name
