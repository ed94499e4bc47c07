"""Part IV, chapters 1-2 (a Hopper tour, the Hopper GEMM ladder): they render through the
app, their cells name real problems and backends, every kernel file they name is shipped and
does what the prose says, their figures suit both themes, their links reach chapters, and
every measured number they quote is the one recorded in bench/results/*.json or
bench/RESULTS.md (figures computed from those numbers are recomputed here)."""

from __future__ import annotations

import json
import re
import xml.dom.minidom
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from kplay.app.benchrefs import MISSING
from kplay.app.book import Book, Chapter
from kplay.app.bookindex import load_terms
from kplay.config import Settings
from kplay.kernels.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
GEMM = ROOT / "kernels" / "problems" / "gemm_bf16" / "solutions"
FIGURE = re.compile(r"!\[[^\]]+\]\((/static/book/[^)]+)\)")
LINK = re.compile(r"\]\((/book/[^)#\s]+)")
SLUGS = ("hopper-tour", "hopper-gemm-ladder")
EMBEDS = {"hopper-tour": {"vector_add", "sum", "hgemm_wmma"}, "hopper-gemm-ladder": {"gemm_bf16"}}
SECTIONS = ["In this chapter you will", "Exercise", "What the roofline says", "Further reading"]
RUNS = {"A": "hopper_ladder_h200.json", "B": "hopper_ladder_h200_h4h6h7.json"}
PART2_RUNGS = ("01_naive", "02_coalesced", "03_smem_tiling", "04_blocktile_1d", "05_blocktile_2d",
               "06_vectorized", "07_warptile", "08_wmma_naive", "08_wmma")  # fmt: skip
TOUR_RUN = "## 2026-12-04 — H200: the TMA copy cell and the cluster cell run"
NEW_TERMS = ("async proxy", "distributed shared memory", "epilogue", "mbarrier", "multicast",
             "persistent kernel", "ping-pong", "setmaxnreg", "swizzle", "tensor map",
             "thread-block cluster", "warp specialisation", "warpgroup")  # fmt: skip


@pytest.fixture(scope="module")
def chapters() -> dict[str, Chapter]:
    book = Book(Settings().book_dir, load_catalog())
    found = {c.slug: c for c in book.chapters() if c.part == 4 and c.slug in SLUGS}
    assert set(found) == set(SLUGS)
    return found


def _text(chapter: Chapter) -> str:
    return chapter.path.read_text(encoding="utf-8")


def _flat(chapter: Chapter) -> str:
    """The chapter's Markdown with line breaks folded, so that a phrase may wrap."""
    return " ".join(_text(chapter).split())


def _rows(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())["rows"]


def _results_section(heading: str) -> str:
    text = (ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    return " ".join(text.split(heading, 1)[1].split("\n## ", 1)[0].split())


def test_the_chapters_open_part_four_in_order(chapters: dict[str, Chapter]) -> None:
    for number, slug in enumerate(SLUGS, start=1):
        chapter = chapters[slug]
        assert int(chapter.number) == number
        assert chapter.part_title == "The modern frontier"
        assert chapter.path.parent.name == "p4" and chapter.path.name.startswith(f"0{number}-")
        assert chapter.title and chapter.summary
        assert 250 <= len(_text(chapter).splitlines()) <= 400, slug


def test_chapters_render_through_the_app(client: TestClient, chapters: dict[str, Chapter]) -> None:
    for chapter in chapters.values():
        page = client.get(f"/book/p4/{chapter.slug}")
        assert page.status_code == 200, chapter.slug
        html = page.text
        assert chapter.title in html
        for cell in chapter.cells:
            assert f'data-cell="{cell.id}"' in html
        for heading in SECTIONS:
            assert heading in html, f"{chapter.slug} lacks {heading!r}"
        assert MISSING not in html
    assert "What the profile says" in client.get("/book/p4/hopper-gemm-ladder").text


def test_cells_name_real_problems_and_backends(chapters: dict[str, Chapter]) -> None:
    catalog = load_catalog()
    ids = [cell.id for c in chapters.values() for cell in c.cells]
    assert len(ids) == len(set(ids))
    for slug, chapter in chapters.items():
        assert {cell.problem for cell in chapter.cells} == EMBEDS[slug]
        for cell in chapter.cells:
            assert cell.id.startswith("p4-"), cell.id
            spec = catalog[cell.problem]
            assert cell.backend == "cuda" and set(cell.backends) <= set(spec.backends)
            assert spec.starter(cell.backend).strip()


def test_every_kernel_file_the_chapters_name_is_shipped(chapters: dict[str, Chapter]) -> None:
    catalog = load_catalog()
    named = re.compile(r"`([a-z0-9_]+(?:\.[a-z_]+)?\.(?:cu|py))`")
    for chapter in chapters.values():
        shipped: dict[str, str] = {}
        for problem in {cell.problem for cell in chapter.cells}:
            for kind in ("correct", "wrong"):
                shipped |= {path.name: kind for _, path in catalog[problem].solutions(kind)}
        for name in named.findall(_text(chapter)):
            assert name in shipped, f"{chapter.slug} names {name}, which no embedded problem ships"
    ladder = _text(chapters["hopper-gemm-ladder"])
    rungs = sorted(p.name for p in (GEMM / "correct").glob("gemm_bf16_h[0-9]_*.cu"))
    wrong = sorted(p.name for p in (GEMM / "wrong").glob("gemm_bf16_h3_*.cu"))
    assert len(rungs) >= 7 and len(wrong) == 4
    for name in rungs + wrong:
        assert f"`{name}`" in ladder, f"the ladder chapter does not name {name}"


def _code_blocks(chapter: Chapter) -> list[str]:
    return re.findall(r"```cuda\n(.*?)```", _text(chapter), re.S)


def _squash(code: str) -> str:
    return re.sub(r"\s+", "", re.sub(r"//[^\n]*", "", code))


def test_code_quoted_from_the_kernels_is_theirs(chapters: dict[str, Chapter]) -> None:
    """The functions the chapters print are the shipped kernels' own, character for character
    (comments and spacing aside)."""
    h1 = _squash((GEMM / "correct" / "gemm_bf16_h1_tma_wgmma.cu").read_text())
    h7 = _squash((GEMM / "correct" / "gemm_bf16_h7_persistent.cu").read_text())
    tour = [_squash(b) for b in _code_blocks(chapters["hopper-tour"])]
    desc = next(b for b in tour if "smem_desc(uint32_t" in b)
    assert desc in h1
    ladder = [_squash(b) for b in _code_blocks(chapters["hopper-gemm-ladder"])]
    assert next(b for b in ladder if "pair_tile(int" in b) in h7
    loop = next(b for b in ladder if "mbar_wait(&full,kb&1)" in b)
    # The quote leaves out an unroll pragma and the accumulator fence before the barrier.
    loop = loop.replace("for(intkk=0;kk<4;++kk)", "#pragmaunrollfor(intkk=0;kk<4;++kk)")
    assert loop in h1.replace("fence_acc(d);__syncthreads();", "__syncthreads();")


def test_the_tour_cells_solutions_use_what_the_prose_describes() -> None:
    problems = ROOT / "kernels" / "problems"
    tma = (problems / "vector_add/solutions/correct/vector_add_tma.cu").read_text()
    for piece in ("tma.a=(256)", "mbarrier.arrive.expect_tx", "fence.proxy.async",
                  "cp.async.bulk.tensor.1d", "try_wait.parity", "wait_group.read 0"):  # fmt: skip
        assert piece in tma, piece
    assert "#define BOX 256" in tma and "#define BOXES 32" in tma  # 8,192 elements, 64 KiB
    cluster = (problems / "sum/solutions/correct/reduce_sum_cluster_dsmem.cu").read_text()
    assert "cluster=(2)" in cluster and "map_shared_rank" in cluster
    assert cluster.count("    cluster.sync();") == 2  # before reading the partner, and after
    wgmma = (problems / "hgemm_wmma/solutions/correct/hgemm_wgmma_sm90a.cu").read_text()
    assert "arch=sm_90a" in wgmma and "m64n64k16" in wgmma
    h4 = (GEMM / "correct" / "gemm_bf16_h4_cooperative.cu").read_text()
    assert "regs_dec<40>" in h4 and "regs_inc<232>" in h4 and "__launch_bounds__(384, 1)" in h4


def test_figures_exist_are_accessible_and_suit_both_themes(
    chapters: dict[str, Chapter],
) -> None:
    for number, slug in enumerate(SLUGS, start=1):
        urls = FIGURE.findall(_text(chapters[slug]))
        assert any(Path(u).name.startswith(f"p4-{number:02d}-") for u in urls), slug
        for url in urls:
            path = ROOT / url.lstrip("/")
            assert path.is_file(), f"{slug} shows missing figure {url}"
            svg = path.read_text(encoding="utf-8")
            root = xml.dom.minidom.parseString(svg).documentElement
            assert root.getAttribute("role") == "img" and root.getAttribute("aria-label")
            assert root.getElementsByTagName("title")
            assert "currentColor" in svg
            assert not re.search(r'(fill|stroke)="(#fff|#ffffff|white|black|#000)"', svg, re.I)


def test_links_reach_chapters_of_the_book(chapters: dict[str, Chapter]) -> None:
    book = Book(Settings().book_dir, load_catalog())
    urls = {c.url for c in book.chapters()}
    links = [u for c in chapters.values() for u in LINK.findall(_text(c))]
    assert links, "the chapters link no other chapter"
    for url in links:
        assert url in urls, f"{url} is not a chapter"


# --- the measured figures ---------------------------------------------------------------


def test_the_ladder_table_is_the_two_recorded_runs(chapters: dict[str, Chapter]) -> None:
    text = _text(chapters["hopper-gemm-ladder"])
    row = re.compile(r"^\| (h\d|—) \| [^|]+ \| ([AB]) \|((?: [^|]+ \|){7})$", re.M)
    seen: set[tuple[str, str]] = set()
    for rung, run, cells in row.findall(text):
        values = [c.strip() for c in cells.strip(" |").split("|")]
        rows = _rows(RUNS[run])
        key = "cublas" if rung == "—" else rung
        seen.add((key, run))
        for size, (us, tflops, share) in ((4096, values[0:3]), (8192, values[3:6])):
            rec = rows[f"{key}@{size}"]
            assert us == f"{rec['median_us']:.1f}" and tflops == f"{rec['tflops']:.1f}"
            assert share == ("—" if key == "cublas" else f"{rec['percent_of_cublas']:.1f}")
        assert values[6] == ("—" if key == "cublas" else str(rows[f"{key}@4096"]["registers"]))
    recorded = {(k.split("@")[0], run) for run, name in RUNS.items() for k in _rows(name)}
    assert seen == recorded, recorded ^ seen
    for name in RUNS.values():
        meta = json.loads((RESULTS / name).read_text())["meta"]
        assert meta["device"] == "NVIDIA H200" and f"`{meta['commit']}`" in text
        assert f"{meta['date'][11:16]} UTC" in text and meta["date"][:10] in text


def test_the_ladder_prose_quotes_the_recorded_runs(chapters: dict[str, Chapter]) -> None:
    flat = _flat(chapters["hopper-gemm-ladder"])
    a, b = _rows(RUNS["A"]), _rows(RUNS["B"])
    h7 = b["h7@8192"]
    assert f"({h7['median_us']:.1f} µs against cuBLAS's {h7['cublas_us']:.1f} µs" in flat
    noisy = a["h2@8192"]
    assert f"{noisy['iqr_us']:.1f} µs over {noisy['reps']} repetitions" in flat
    others = [r for rows in (a, b) for k, r in rows.items() if k != "h2@8192" and "registers" in r]
    widest = max(others, key=lambda r: r["iqr_us"])
    assert f"exceeded {widest['iqr_us']:.1f} µs (h3 at 8192³)" in flat and widest is a["h3@8192"]
    low, high = b["h7@4096"]["percent_of_roofline"], h7["percent_of_roofline"]
    assert f"reaches {low:.1f}% of it at 4096³ and {high:.1f}% at 8192³" in flat
    assert f"{100 - b['h7@4096']['percent_of_cublas']:.1f} points short" in flat
    wmma = json.loads((RESULTS / "gemm_ladder.json").read_text())["08_wmma"]["tflops"]
    best = b["h7@4096"]["tflops"]
    assert f"{best:.1f} TFLOP/s against {wmma:.1f}" in flat and f"{best / wmma:.2f} times" in flat
    ceilings = json.loads((RESULTS / "ceilings_h200.json").read_text())
    assert f"{ceilings['bf16_tc_flops_per_s'] / 1e12:.0f} TFLOP/s" in flat
    ratio = b["h7@4096"]["percent_of_roofline"] / b["h7@4096"]["percent_of_cublas"]
    assert ratio < 1  # the roof (cuBLAS through torch) is above the problem's cuBLAS
    for size, rung_a, rung_b in ((4096, "93.9", "93.8"), (8192, "91.5", "91.1")):
        assert f"{a[f'h4@{size}']['percent_of_cublas']:.1f}" == rung_a
        assert f"{b[f'h4@{size}']['percent_of_cublas']:.1f}" == rung_b
    assert "(93.8% and 91.1%)" in flat and "93.9% of cuBLAS at 4096³ and 91.5% at 8192³" in flat


H100_RUNS = {"1": "hopper_ladder_h100_h7h8.json", "2": "hopper_ladder_h100_h8_7799f8e.json"}


def test_rung_8_is_quoted_from_its_h100_runs_and_only_from_them(
    chapters: dict[str, Chapter],
) -> None:
    text, flat = _text(chapters["hopper-gemm-ladder"]), _flat(chapters["hopper-gemm-ladder"])
    labels = {"cublas": "cuBLAS alone", "h7": "h7, register epilogue",
              "h8": "h8, TMA-store epilogue"}  # fmt: skip
    quoted = re.findall(r"^\| ([^|]+?) \| ([12]) \|((?: [^|]+ \|){4})$", text, re.M)
    seen = set()
    for run, name in H100_RUNS.items():
        data = json.loads((RESULTS / name).read_text())
        meta = data["meta"]
        assert meta["device"].startswith("NVIDIA H100") and meta["date"][:10] == "2026-12-07"
        assert f"run {run}: `bench/results/{name}`, tree `{meta['commit']}`" in flat, name
        for key in {k.split("@")[0] for k in data["rows"]}:
            cells = []
            for size in (4096, 8192):
                rec = data["rows"][f"{key}@{size}"]
                share = "—" if key == "cublas" else f"{rec['percent_of_cublas']:.1f}"
                cells += [f"{rec['median_us']:.1f}", share]
            assert f"| {labels[key]} | {run} | {' | '.join(cells)} |" in text, (run, key)
            seen.add((labels[key], run))
    assert {(label, run) for label, run, _ in quoted} == seen and len(quoted) == len(seen) == 5
    first, second = (_rows(name) for name in H100_RUNS.values())
    gains = [first[f"h8@{n}"]["percent_of_cublas"] - first[f"h7@{n}"]["percent_of_cublas"]
             for n in (4096, 8192)]  # fmt: skip
    assert f"worth {gains[0]:.1f} points at 4096³ and {gains[1]:.1f} at 8192³" in flat
    big = {rows["h8@8192"]["percent_of_cublas"] for rows in (first, second)}
    short = sorted(100 - rows["h8@4096"]["percent_of_cublas"] for rows in (first, second))
    assert len(big) == 1 and f"rung 8 is at {big.pop():.1f}% of cuBLAS at 8192³ both times" in flat
    assert f"and {short[0]:.1f} to {short[1]:.1f} points short at 4096³" in flat
    h200 = {k for f in RESULTS.glob("hopper_ladder_h200*.json") for k in _rows(f.name)}
    assert not any(k.startswith("h8@") for k in h200), "rung 8 was measured on the H200: say so"
    assert "Rung 8 has not been measured on the H200" in flat


def test_the_tail_of_rung_8_is_counted_as_the_chapter_says(chapters: dict[str, Chapter]) -> None:
    flat = _flat(chapters["hopper-gemm-ladder"])
    h8 = (GEMM / "correct" / "gemm_bf16_h8_tma_store.cu").read_text().splitlines()[0]
    assert "grid=(2*min(66,ceil_div(M,256)*ceil_div(N,256)))" in h8 and "cluster=(2)" in h8
    clusters = 132 // 2
    for n, words in ((4096, "256 pairs, 3.88 rounds"), (8192, "1,024 pairs, 15.5 rounds")):
        pairs = (n // 256) * (n // 256)  # a cluster's two blocks take a 256 x 256 pair of tiles
        rounds = pairs / clusters
        paid = -(-pairs // clusters)
        assert f"{pairs:,} pairs, {rounds:.{2 if n == 4096 else 1}f} rounds" == words
        assert words in flat and round(100 * (1 - rounds / paid)) == 3
    assert f"{(4096 // 128) * (4096 // 256)} tiles of 128 x 256 go to {clusters}" in flat
    assert f"only {256 - 3 * clusters} of the {clusters}" in flat and "also 3%" in flat
    assert "about 3% lost to the tail" in flat and "it is not built here" in flat


def test_the_ladder_arithmetic_follows_from_the_kernels(chapters: dict[str, Chapter]) -> None:
    flat = _flat(chapters["hopper-gemm-ladder"])
    stage3, stage4 = 64 * 64 * 2 + 64 * 256 * 2, 128 * 64 * 2 + 64 * 256 * 2
    assert (stage3, stage4) == (40960, 49152) and "40,960 bytes" in flat
    flops3, flops4 = 64 * 256 * 64 * 2, 128 * 256 * 64 * 2
    assert f"{round(flops3 / stage3)} per byte" in flat or f"{round(flops3 / stage3)} FLOPs" in flat
    assert f"{round(flops4 / stage4)} per byte" in flat
    assert f"{round((stage4 / stage3 - 1) * 100)}% more bytes" in flat
    tiles = (4096 // 128) * (4096 // 256)
    assert f"{tiles} output tiles" in flat and f"{tiles / 132:.1f} waves over 132 SMs" in flat
    assert f"only {4096 // 64} slices long" in flat
    for n, words in ((4096, "1,024 FLOP per byte"), (8192, "2,048")):
        intensity = 2 * n**3 / (2 * (n * n + n * n) + 4 * n * n)  # the problem's formulas
        assert intensity == int(words.split()[0].replace(",", "")) and words in flat
    h1 = (GEMM / "correct" / "gemm_bf16_h1_tma_wgmma.cu").read_text()
    assert "smem=41984" in h1 and 41984 == stage3 + 1024 and "41 KiB" in flat
    # 154 registers, rounded to 160 per thread, allow 3 blocks of 128 threads in 65,536.
    assert _rows(RUNS["A"])["h1@4096"]["registers"] == 154 and 65536 // (160 * 128) == 3


def test_the_tour_quotes_the_recorded_runs(chapters: dict[str, Chapter]) -> None:
    flat = _flat(chapters["hopper-tour"])
    run = _results_section(TOUR_RUN)
    quoted = {
        "vector_add_tma.cu": ("51.8 µs", "3885 GB/s", "91.2%", "4262 GB/s"),
        "vector_add_float4.cu": ("47.0 µs", "4281 GB/s", "100.5%"),
        "reduce_sum_cluster_dsmem.cu": ("59.4 µs", "2260 GB/s", "53.0%"),
        "hgemm_wgmma_sm90a.cu": ("5.89 ms", "23.3 TFLOP/s", "3.0%"),
    }
    for name, figures in quoted.items():
        line = next(ln for ln in run.split("| `")[1:] if name in ln.split("`")[0])
        for figure in figures:
            assert figure in line, (name, figure)
            assert figure in flat, (name, figure)
    earlier = _results_section("## 2026-12-03 (night) — H200: Hopper cells")
    assert "5743 µs" in earlier and "14227 µs" in earlier
    assert "5743 µs, against 14227 µs" in flat
    assert "**about 635 TFLOP/s**" in (ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    assert "about 635 TFLOP/s" in flat
    best = _rows(RUNS["B"])["h7@8192"]["tflops"]
    cublas = _rows(RUNS["A"])["cublas@8192"]["tflops"]
    assert f"| {best:.1f} TFLOP/s |" in flat and f"| {cublas:.1f} TFLOP/s |" in flat
    assert f"{best:.1f} TFLOP/s, about {best / 635:.2f} times" in flat
    assert f"{100.5 - 91.2:.0f}-point gap" in flat


def test_the_register_budget_of_the_tour_adds_up(chapters: dict[str, Chapter]) -> None:
    flat = _flat(chapters["hopper-tour"])
    assert 128 * 40 + 256 * 232 == 64512 <= 65536 and "= 64,512" in flat
    per_thread = 65536 // 384 // 8 * 8  # what __launch_bounds__(384, 1) leaves, in 8s
    assert per_thread == 168 == _rows(RUNS["A"])["h4@4096"]["registers"]
    assert f"use {per_thread} registers per thread" in flat


def test_the_chart_is_drawn_from_the_recorded_results() -> None:
    svg = (ROOT / "static" / "book" / "p4-02-two-ladders.svg").read_text(encoding="utf-8")
    texts = [t.replace("&#x27;", "'") for t in re.findall(r">([^<>]+)</text>", svg)]
    part2 = json.loads((RESULTS / "gemm_ladder.json").read_text())
    widths = [float(w) for w in re.findall(r'<rect x="200" y="\d+" width="([\d.]+)"', svg)]
    expected: list[float] = []
    for key in PART2_RUNGS:
        row = part2[key]
        assert f"{row['percent_of_cublas']:g}% · {row['tflops']:.1f} TFLOP/s" in texts, key
        expected.append(row["percent_of_cublas"])
    a, b = _rows(RUNS["A"]), _rows(RUNS["B"])
    for rung in range(1, 8):
        rows = b if rung in (6, 7) else a
        r4, r8 = rows[f"h{rung}@4096"], rows[f"h{rung}@8192"]
        label = f"{r4['percent_of_cublas']:g}% / {r8['percent_of_cublas']:g}% · {r4['tflops']:.1f}"
        assert f"{label} TFLOP/s" in texts, rung
        expected += [r4["percent_of_cublas"], r8["percent_of_cublas"]]
    assert len(widths) == len(expected) + 1 and widths[-1] == 18  # the last is the legend's
    assert widths[:-1] == pytest.approx([p * 3.3 for p in expected], abs=0.06)


def test_the_new_terms_are_used_in_the_chapters_prose(chapters: dict[str, Chapter]) -> None:
    terms = {t.name: t for t in load_terms(ROOT / "book")}
    prose = " ".join(
        re.sub(r"`[^`]*`", " ", re.sub(r"```.*?```", " ", _text(c), flags=re.S))
        for c in chapters.values()
    )
    for name in NEW_TERMS:
        assert name in terms, name
        assert terms[name].pattern.search(prose), f"{name} is not in the chapters' prose"
