"""Part IV, chapter 3 (Triton in depth): it renders through the app, its cells name real
problems and the Triton backend, every kernel file it names is shipped and the code it prints
is those files' own, the compiler listings it reads are the ones recorded with the H100 runs,
every measured number it quotes is the one recorded in bench/results/*.json or
bench/RESULTS.md (figures computed from them are recomputed here), and the Triton features it
describes exist in the installed Triton. Its FP8 speed is checked in test_book_part4_fp8_speed."""

from __future__ import annotations

import inspect
import json
import re
import tomllib
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
PROBLEMS = ROOT / "kernels" / "problems"
GEMM = PROBLEMS / "gemm_bf16" / "solutions"
FP8 = PROBLEMS / "gemm_fp8" / "solutions"
SLUG = "triton-in-depth"
SECTIONS = ["In this chapter you will", "From Python to PTX", "Autotuning", "Exercise",
            "What the roofline says", "Further reading"]  # fmt: skip
TILED, PERSISTENT = "triton_tiled_4096_h100.json", "triton_persistent_4096_h100.json"
LADDER = "hopper_ladder_h100_h7h8.json"
H100_RUN = "## 2026-12-07 — H100: Hopper ladder rung 8 (TMA-store epilogue) and Triton bf16 GEMMs"
NEW_TERMS = ("autotuning", "block scaling", "FP8", "tensor descriptor", "Triton IR")


@pytest.fixture(scope="module")
def chapter() -> Chapter:
    book = Book(Settings().book_dir, load_catalog())
    found = [c for c in book.chapters() if c.part == 4 and c.slug == SLUG]
    assert len(found) == 1
    return found[0]


def _text(chapter: Chapter) -> str:
    return chapter.path.read_text(encoding="utf-8")


def _flat(chapter: Chapter) -> str:
    return " ".join(_text(chapter).split())


def _prose(chapter: Chapter) -> str:
    """The Markdown without code blocks and code spans."""
    return re.sub(r"`[^`]*`", " ", re.sub(r"```.*?```", " ", _text(chapter), flags=re.S))


def _run(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def _section(flat: str, heading: str) -> str:
    return flat.split(f"## {heading}", 1)[1].split(" ## ", 1)[0]


def _squash(code: str) -> str:
    """Code without comments, docstrings and spacing."""
    code = re.sub(r'"""[^"]*"""', "", re.sub(r"#[^\n]*", "", code))
    return re.sub(r"\s+", "", code)


def test_the_chapter_is_part_four_chapter_three(chapter: Chapter) -> None:
    assert int(chapter.number) == 3 and chapter.part_title == "The modern frontier"
    assert chapter.path.parent.name == "p4" and chapter.path.name == "03-triton-in-depth.md"
    assert chapter.title == "Triton in depth" and "H100" in chapter.summary
    assert 300 <= len(_text(chapter).splitlines()) <= 400


def test_the_chapter_renders_through_the_app(client: TestClient, chapter: Chapter) -> None:
    page = client.get(f"/book/p4/{SLUG}")
    assert page.status_code == 200
    html = page.text
    assert chapter.title in html and MISSING not in html
    for cell in chapter.cells:
        assert f'data-cell="{cell.id}"' in html
    for heading in SECTIONS:
        assert heading in html, heading


def test_cells_are_the_triton_gemm_and_fp8_problems(chapter: Chapter) -> None:
    catalog = load_catalog()
    assert {cell.problem for cell in chapter.cells} == {"gemm_bf16", "gemm_fp8"}
    for cell in chapter.cells:
        assert cell.id.startswith("p4-triton-")
        assert cell.backend == "triton" and tuple(cell.backends) == ("triton",)
        assert "triton" in catalog[cell.problem].backends
    gemm = catalog["gemm_bf16"].starter("triton")
    assert "BLOCK_M=64 BLOCK_N=64 BLOCK_K=32" in gemm and "TODO" in gemm
    fp8 = catalog["gemm_fp8"].starter("triton")
    assert "part = tl.dot(a, b.T)" in fp8 and "TODO" in fp8


def test_every_file_named_is_shipped_and_every_triton_one_is_named(chapter: Chapter) -> None:
    catalog = load_catalog()
    shipped: set[str] = set()
    for problem in ("gemm_bf16", "gemm_fp8"):
        for kind in ("correct", "wrong"):
            shipped |= {path.name for _, path in catalog[problem].solutions(kind)}
        shipped |= {p.name for p in (PROBLEMS / problem / "starter").iterdir()}
    text = _text(chapter)
    for name in re.findall(r"`([a-z0-9_]+\.(?:triton\.py|cu))`", text):
        assert name in shipped, f"the chapter names {name}, which is not shipped"
    triton_files = [*GEMM.glob("*/*.triton.py"), *FP8.glob("*/*.triton.py")]
    assert len(triton_files) == 8
    for path in triton_files:
        assert f"`{path.name}`" in text, f"the chapter does not name {path.name}"


def test_code_quoted_is_the_kernels_own(chapter: Chapter) -> None:
    blocks = [_squash(b) for b in re.findall(r"```python\n(.*?)```", _text(chapter), re.S)]
    tiled = _squash((GEMM / "correct" / "gemm_bf16_tiled.triton.py").read_text())
    persistent = _squash((GEMM / "correct" / "gemm_bf16_persistent.triton.py").read_text())
    fp8 = _squash((FP8 / "correct" / "gemm_fp8_blockscaled.triton.py").read_text())
    quoted = {
        "fork0inrange(0,K,BLOCK_K)": tiled,
        "def_tile_coords(": persistent,
        "fortileintl.range(": persistent,
        "part=tl.dot(a,b.T)": fp8,
    }
    for marker, source in quoted.items():
        block = next(b for b in blocks if marker in b)
        assert block in source, marker
    # The one block that is not a shipped kernel is the autotuning sketch.
    assert [b for b in blocks if not any(m in b for m in quoted)] == [
        next(b for b in blocks if "@triton.autotune" in b)
    ]


# --- the listings recorded with the H100 runs ---------------------------------------------


def test_the_ttgir_quoted_is_the_recorded_listing(chapter: Chapter) -> None:
    text, flat = _text(chapter), _flat(chapter)
    tiled, persistent = _run(TILED)["compile"], _run(PERSISTENT)["compile"]
    block = re.search(r"```text\n(.*?)```", text, re.S).group(1)  # type: ignore[union-attr]
    for line in block.strip().splitlines():
        assert line in tiled["ir"]["ttgir"] and line in persistent["ir"]["ttgir"], line
    assert "HGMMA.64x256x16.F32.BF16" in flat
    assert tiled["sass"].count("HGMMA.64x256x16.F32.BF16") == 4  # 64 / 16 per slice
    for op in ("tt.load", "ttg.local_alloc", "ttng.warp_group_dot", "pendings = 0"):
        assert op in tiled["ir"]["ttgir"] and f"`{op}`" in text, op
    assert "async_copy" not in tiled["ir"]["ttgir"]  # that variant's loop is not pipelined
    assert "%rows = arith.subi %c1_i32, %first_m_6 : i32" in tiled["ir"]["ttgir"]
    assert "`%rows = arith.subi %c1_i32, %first_m_6`" in text
    for ir in (tiled["ir"]["ttgir"], persistent["ir"]["ttgir"]):
        line = next(ln for ln in ir.splitlines() if "tt.func public @gemm_bf16(" in ln)
        names = re.findall(r"%(\w+): ", line)
        assert "M" not in names and {"N", "K"} <= set(names)  # M = 1 compiled in
    for op in ("ttng.async_tma_copy_global_to_local", "ttng.barrier_expect",
               "ttng.wait_barrier", "ttng.async_tma_copy_local_to_global"):  # fmt: skip
        assert op in persistent["ir"]["ttgir"] and f"`{op}`" in text, op
    assert persistent["ir"]["ttgir"].count("ttng.init_barrier") == 3
    for op in ("UTMALDG", "UTMASTG"):
        assert op in persistent["sass"] and op not in tiled["sass"]


def test_the_listings_are_of_the_first_case(chapter: Chapter) -> None:
    flat = _flat(chapter)
    problem = tomllib.loads((PROBLEMS / "gemm_bf16" / "problem.toml").read_text())
    first = problem["tests"][0]["params"]
    assert first == {"M": 1, "N": 8, "K": 8} and "first case the checker runs is 1 x 8 x 8" in flat
    tiled = _run(TILED)["compile"]["resources"][0]
    assert tiled["registers"] == 255 and "with 255 registers and spills" in flat
    assert "STL" in _run(TILED)["compile"]["sass"]
    shared = _run(PERSISTENT)["compile"]["resources"][0]["shared_bytes"]
    stage = 128 * 64 * 2 + 64 * 256 * 2
    assert stage == 48 * 1024 and shared == 3 * stage + 128 * 128 * 4 + 3 * 8
    assert f"{shared:,} bytes" in flat and "three stages of 48 KiB" in flat
    assert "64 KiB to stage one half of `C`" in flat and "24 bytes for the three mbarriers" in flat


# --- the measured figures -----------------------------------------------------------------


def _row(label: str, cells: list[str]) -> str:
    return f"| {label} | {' | '.join(cells)} |"


def _triton_cells(run: dict) -> list[str]:
    """µs, TFLOP/s, cuBLAS µs in the same run and % of it, as the tables print them."""
    roof = run["roofline"]
    values = (run["timing"]["median_us"], roof["achieved_flops_per_s"] / 1e12,
              roof["baseline_median_us"], roof["speedup_over_baseline"] * 100)  # fmt: skip
    return [f"{v:.1f}" for v in values]


def test_the_table_is_the_recorded_h100_runs(chapter: Chapter) -> None:
    text = _text(chapter)
    ladder = _run(LADDER)
    assert ladder["meta"]["device"] == "NVIDIA H100 80GB HBM3"
    rows = ladder["rows"]
    cublas = rows["cublas@4096"]
    head = [f"{cublas['median_us']:.1f}", f"{cublas['tflops']:.1f}", "—", "—"]
    assert _row("cuBLAS alone", head) in text
    for key, label in (("h7", "CUDA rung 7, persistent clusters"),
                       ("h8", "CUDA rung 8, TMA-store epilogue")):  # fmt: skip
        r = rows[f"{key}@4096"]
        cells = [f"{r['median_us']:.1f}", f"{r['tflops']:.1f}", f"{r['cublas_us']:.1f}",
                 f"{r['percent_of_cublas']:.1f}"]  # fmt: skip
        assert _row(label, cells) in text, label
    for name, label in ((TILED, "Triton tiled, 128 x 256 x 64, 8 warps, 3 stages"),
                        (PERSISTENT, "Triton persistent, tensor descriptors")):  # fmt: skip
        run = _run(name)
        assert run["state"] == "done" and run["verified"] and run["timing"]["l2_flushed"]
        assert run["system"]["device"] == "NVIDIA H100 80GB HBM3"
        assert run["system"]["libraries"]["triton"] == "3.6.0"
        assert _row(label, _triton_cells(run)) in text, label
        assert re.search(rf"`(bench/results/)?{name}`", text), name
    assert f"`{LADDER}`" in text and "Triton 3.6.0" in text and "2026-12-07" in text


def test_the_results_log_says_the_same(chapter: Chapter) -> None:
    log = (ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    run = " ".join(log.split(H100_RUN, 1)[1].split("\n## ", 1)[0].split())
    assert "NVIDIA H100 80GB HBM3" in run and "Triton 3.6.0" in run
    tiled = _triton_cells(_run(TILED))
    assert _row("Triton tiled, 128x256x64, 8 warps, 3 stages", tiled) in run
    bold = [f"**{c}**" if i != 2 else c for i, c in enumerate(_triton_cells(_run(PERSISTENT)))]
    assert _row("**Triton persistent, tensor descriptors**", bold) in run
    assert "60 s CPU-time limit" in run and "60-second CPU-time limit" in _flat(chapter)
    assert "The H200 table of the previous chapter is another card" in _flat(chapter)


def test_the_prose_figures_follow_from_the_runs(chapter: Chapter) -> None:
    flat = _flat(chapter)
    pct = {n: _run(n)["roofline"]["speedup_over_baseline"] * 100 for n in (TILED, PERSISTENT)}
    tiled, persistent = round(pct[TILED], 1), round(pct[PERSISTENT], 1)
    rows = _run(LADDER)["rows"]
    h7, h8 = rows["h7@4096"]["percent_of_cublas"], rows["h8@4096"]["percent_of_cublas"]
    assert f"reaches {tiled:.1f}% of cuBLAS" in flat
    assert f"add {persistent - tiled:.1f} points" in flat
    assert f"{persistent:.1f}% against {tiled:.1f}%" in flat
    assert f"Rung 8 is still {h8 - persistent:.1f} points ahead" in flat
    assert round(h7 - persistent, 1) == 1.0 and "is one point ahead" in flat
    roofs = {n: _run(n)["roofline"]["percent_of_roofline"] for n in (TILED, PERSISTENT)}
    assert f"at {roofs[PERSISTENT]:.1f}% of it and the tiled kernel at {roofs[TILED]:.1f}%" in flat
    peak = _run(TILED)["roofline"]["compute_ceiling_flops_per_s"]
    assert _run(TILED)["roofline"]["ceilings_source"] == "datasheet"
    assert f"{peak / 1e12:.0f} TFLOP/s" in flat
    cublas = rows["cublas@4096"]["flops_per_s"] / peak * 100
    assert f"about {cublas:.0f}%" in flat
    intensity = _run(TILED)["roofline"]["intensity_flops_per_byte"]
    assert intensity == 2 * 4096**3 / (2 * 2 * 4096**2 + 4 * 4096**2) == 1024
    assert "1,024 FLOP per byte" in flat
    assert (4096 // 128) * (4096 // 256) == 512 and "512 launched blocks" in flat


def test_the_line_counts_quoted_are_the_files(chapter: Chapter) -> None:
    flat = _flat(chapter)
    for name in ("gemm_bf16_tiled.triton.py", "gemm_bf16_persistent.triton.py"):
        assert len((GEMM / "correct" / name).read_text().splitlines()) < 100
    h8 = len((GEMM / "correct" / "gemm_bf16_h8_tma_store.cu").read_text().splitlines())
    assert 350 <= h8 <= 400 and "under a hundred lines of Python" in flat
    assert "nearly four hundred lines of CUDA C++" in flat


def test_the_fp8_section_quotes_only_the_h100_sweep(chapter: Chapter) -> None:
    flat = _flat(chapter)
    fp8 = _section(flat, "FP8: a dot product that needs promoting")
    figures = re.findall(r"[\d.]+(?= ?(?:%|µs|TFLOP/s))", fp8)
    assert figures == ["61.3", "66.2"], "an FP8 figure not checked against the recorded sweep"
    assert "On an H100 at 4096³" in fp8 and "(/book/p4/fp8-gemm)" in fp8
    launch = (FP8 / "correct" / "gemm_fp8_blockscaled.triton.py").read_text()
    assert "BLOCK_N=128 BLOCK_K=128" in launch and "num_stages=4" in launch
    assert "16 KiB each per stage, four stages" in fp8 and 128 * 128 == 16 * 1024


def test_the_wrong_kernels_fail_where_the_chapter_says(chapter: Chapter) -> None:
    """The arithmetic behind the answers: which cases give a program a second tile, and which
    have more than one block of scales."""
    flat = _flat(chapter)
    gemm = tomllib.loads((PROBLEMS / "gemm_bf16" / "problem.toml").read_text())["tests"]
    tiles = {t["name"]: -(-t["params"]["M"] // 128) * -(-t["params"]["N"] // 256) for t in gemm}
    over = [name for name, count in tiles.items() if count > 132]
    assert over == ["2048x2304x72"] and tiles["2048x2304x72"] == 144 == 16 * 9
    assert max(c for n, c in tiles.items() if n not in over) == 9 and "at most nine tiles" in flat
    assert "16 x 9 = 144 tiles against 132 programs" in flat and "last 12 tiles" in flat
    assert "`144 // 132 = 1`" in flat
    gpu_only = [t["name"].replace("x", " x ") for t in gemm if t.get("simulate") is False]
    assert f"skips {gpu_only[0]}, {gpu_only[1]} and {gpu_only[2]}" in flat
    fp8 = tomllib.loads((PROBLEMS / "gemm_fp8" / "problem.toml").read_text())["tests"]
    first, second = fp8[0]["params"], fp8[1]["params"]
    assert first["K"] == first["N"] == 128 and (second["N"], second["K"]) == (256, 384)
    # b_scale is (N/128) x (K/128) = 2 x 3: block (0, 1) at 1, read at kb * 2 + nb = 2.
    assert (0 * 3 + 1, 1 * 2 + 0) == (1, 2) and "read from element 2 instead of 1" in flat
    wrong = (GEMM / "wrong" / "gemm_bf16_tiled_k_whole_slices.triton.py").read_text()
    assert "range(0, K - BLOCK_K + 1, BLOCK_K)" in wrong and not list(range(0, 8 - 64 + 1, 64))


# --- what the chapter says of Triton ------------------------------------------------------


def test_the_triton_features_described_exist() -> None:
    import triton
    import triton.language as tl
    from triton import knobs, testing
    from triton.backends.nvidia import compiler as nvidia
    from triton.compiler import compiler

    knob_source = inspect.getsource(knobs)
    for name in ("TRITON_KERNEL_DUMP", "TRITON_DUMP_DIR", "TRITON_ALWAYS_COMPILE",
                 "TRITON_PRINT_AUTOTUNING", "TRITON_CACHE_AUTOTUNING"):  # fmt: skip
        assert f'"{name}"' in knob_source, name
    tune = inspect.signature(triton.autotune).parameters
    assert {"configs", "key", "prune_configs_by", "warmup", "rep", "cache_results"} <= set(tune)
    bench = inspect.signature(testing.do_bench).parameters
    assert bench["warmup"].default == 25 and bench["rep"].default == 100
    loop = inspect.signature(tl.range).parameters
    assert {"num_stages", "loop_unroll_factor", "disallow_acc_multi_buffer", "flatten",
            "warp_specialize"} <= set(loop)  # fmt: skip
    assert callable(tl.make_tensor_descriptor) and callable(triton.set_allocator)
    assert "max_num_imprecise_acc" in inspect.signature(tl.dot).parameters
    assert "2**30 if capability == 90" in inspect.getsource(nvidia)
    stages = inspect.getsource(nvidia.CUDABackend.add_stages)
    for stage in ("ttir", "ttgir", "llir", "ptx", "cubin"):
        assert f'stages["{stage}"]' in stages, stage
    assert 'key == "sass"' in inspect.getsource(compiler.AsmDict)
    assert str(tl.float8e4nv) == "fp8e4nv"
    from triton.experimental.gluon.language.nvidia import hopper

    assert hasattr(hopper, "tma") and hasattr(hopper, "mbarrier")


def test_links_reach_chapters_and_new_terms_are_used(chapter: Chapter) -> None:
    book = Book(Settings().book_dir, load_catalog())
    urls = {c.url for c in book.chapters()}
    links = re.findall(r"\]\((/book/[^)#\s]+)", _text(chapter))
    assert "/book/p4/hopper-gemm-ladder" in links and "/book/p3/flash-attention-2-triton" in links
    for url in links:
        assert url in urls, url
    terms = {t.name: t for t in load_terms(ROOT / "book")}
    prose = _prose(chapter)
    for name in NEW_TERMS:
        assert name in terms and terms[name].pattern.search(prose), name
