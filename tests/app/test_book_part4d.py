"""Part IV, chapter 6 (FP8 GEMM on Hopper): it renders through the app with a real gemm_fp8
cell; its table of the two formats is what torch's float8 types and their bits say; its error
tables are the recorded run of bench/fp8_error.py (and the script still gives those numbers);
the contract, code and wrong-kernel answers are the problem's own and the checker's; and the
Triton knob it describes exists. Its measured speed is checked in test_book_part4_fp8_speed.py."""

from __future__ import annotations

import importlib.util
import inspect
import json
import math
import re
import sys
import tomllib
from html import unescape
from pathlib import Path
from types import ModuleType

import pytest
from fastapi.testclient import TestClient

from kplay.app.benchrefs import MISSING
from kplay.app.book import Book, Chapter
from kplay.app.bookindex import load_terms
from kplay.config import Settings
from kplay.kernels import roofline
from kplay.kernels.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
FP8 = ROOT / "kernels" / "problems" / "gemm_fp8"
SLUG = "fp8-gemm"
SECTIONS = ("In this chapter you will", "Eight bits, two ways", "Per tensor, per row, per block",
            "Sums with fewer bits than fp32", "The problem's contract", "Exercise",
            "Speed, measured on an H100", "Further reading")  # fmt: skip
RUN_HEAD = "## 2026-12-07 — FP8 GEMM error on the CPU: scales and short sums (2-vCPU VM, no GPU)"
NEW_TERMS = ("e4m3", "e5m2", "subnormal numbers", "quantisation", "delayed scaling",
             "fast accumulation", "FP8", "block scaling")  # fmt: skip


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


def _errors() -> dict:
    return json.loads((RESULTS / "fp8_error.json").read_text())


def _script() -> ModuleType:
    path = ROOT / "bench" / "fp8_error.py"
    spec = importlib.util.spec_from_file_location("fp8_error_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_chapter_is_part_four_chapter_six(chapter: Chapter) -> None:
    assert int(chapter.number) == 6 and chapter.part_title == "The modern frontier"
    assert chapter.path.parent.name == "p4" and chapter.path.name == "06-fp8-gemm.md"
    assert chapter.title == "FP8 GEMM on Hopper"
    assert 280 <= len(_text(chapter).splitlines()) <= 380


def test_the_chapter_renders_with_its_cell(client: TestClient, chapter: Chapter) -> None:
    page = client.get(f"/book/p4/{SLUG}")
    assert page.status_code == 200
    html = unescape(page.text).replace("\u2019", "'")
    assert chapter.title in html and MISSING not in html
    assert [c.id for c in chapter.cells] == ["p4-fp8-gemm"]
    cell = chapter.cells[0]
    assert cell.problem == "gemm_fp8" and cell.backend == "triton"
    assert f'data-cell="{cell.id}"' in html
    for heading in SECTIONS:
        assert heading in html, heading


# --- the formats --------------------------------------------------------------------------


def _decode(byte: int, exp_bits: int, man_bits: int) -> float:
    """An FP8 bit pattern by the formula: sign, biased exponent, mantissa (NaN and inf aside)."""
    bias = 2 ** (exp_bits - 1) - 1
    sign = -1.0 if byte >> 7 else 1.0
    e, m = (byte >> man_bits) & (2**exp_bits - 1), byte & (2**man_bits - 1)
    if e == 0:
        return sign * m / 2**man_bits * 2.0 ** (1 - bias)
    return sign * (1 + m / 2**man_bits) * 2.0 ** (e - bias)


def test_the_formats_table_is_what_the_bits_give(chapter: Chapter) -> None:
    torch = pytest.importorskip("torch")
    flat = _flat(chapter)
    for dtype, exp_bits, man_bits in ((torch.float8_e4m3fn, 4, 3), (torch.float8_e5m2, 5, 2)):
        values = torch.arange(256, dtype=torch.uint8).view(dtype).float().tolist()
        finite = [v for v in values if math.isfinite(v)]
        for byte, value in enumerate(values):
            if math.isfinite(value):
                assert value == _decode(byte, exp_bits, man_bits), (dtype, byte)
        info = torch.finfo(dtype)
        positive = sorted(v for v in finite if v > 0)
        assert max(finite) == info.max and positive[0] == values[1]
        assert info.smallest_normal == 2.0 ** (2 - 2 ** (exp_bits - 1))
        assert info.eps == 2.0**-man_bits
    e4, e5 = torch.finfo(torch.float8_e4m3fn), torch.finfo(torch.float8_e5m2)
    one = torch.tensor([1], dtype=torch.uint8)
    assert (e4.max, e5.max) == (448.0, 57344.0) == (1.75 * 2**8, 1.75 * 2**15)
    assert one.view(torch.float8_e4m3fn).item() == 2.0**-9 == 0.001953125
    assert one.view(torch.float8_e5m2).item() == 2.0**-16
    assert "| largest finite value | 1.75 × 2^8 = 448 | 1.75 × 2^15 = 57344 |" in flat
    assert f"| smallest normal value | 2^−6 = {e4.smallest_normal} | 2^−14 ≈ 6.10e−05 |" in flat
    assert "| smallest subnormal value | 2^−9 = 0.001953125 | 2^−16 ≈ 1.53e−05 |" in flat
    assert f"| step at 1 (ulp, machine epsilon) | 2^−3 = {e4.eps} | 2^−2 = {e5.eps} |" in flat
    assert f"{e5.smallest_normal:.2e}" == "6.10e-05" and f"{2.0**-16:.2e}" == "1.53e-05"
    # e4m3fn: only S.1111.111 is NaN; e5m2 keeps its all-ones exponent for inf and NaN.
    every = torch.arange(256, dtype=torch.uint8)
    nan4 = [b for b, v in enumerate(every.view(torch.float8_e4m3fn).float().tolist()) if v != v]
    assert nan4 == [0x7F, 0xFF]
    inf5 = torch.tensor([0x7C], dtype=torch.uint8).view(torch.float8_e5m2).item()
    assert inf5 == math.inf and "no infinities" in flat
    # The ranges in binades, and bf16's against e4m3's.
    assert f"{448 / 2**-9:,.0f}" == "229,376" and "(448 / 2^−9 = 229,376)" in flat
    assert round(math.log2(448 / 2**-9), 1) == 17.8 and "about 17.8 binades" in flat
    assert round(math.log2(57344 / 2**-16), 1) == 31.8 and "about 31.8 binades" in flat
    bf16 = torch.finfo(torch.bfloat16)
    lost = math.log2(bf16.max / 2.0**-133) - math.log2(448 / 2**-9)
    assert bf16.eps == 2**-7 and 240 <= lost < 250 and "about 240 binades of range" in flat


def test_the_cost_figures_follow_from_the_sizes_and_datasheet(chapter: Chapter) -> None:
    flat = _flat(chapter)
    sheet = roofline.datasheet("NVIDIA H100 80GB HBM3")
    assert sheet is not None
    fp8, fp32 = sheet.fp8_tc_flops_per_s, sheet.fp32_flops_per_s
    assert (fp8, fp32, sheet.bf16_tc_flops_per_s) == (1979e12, 67e12, 989e12)
    assert "1,979 dense TFLOP/s against 989" in flat and "33.5 T multiply-adds" in flat
    step, fmas = 2 * 128**3, 128 * 128
    assert step == 4_194_304 and f"{step:,} flops" in flat and f"{fmas:,} fp32" in flat
    equivalent = fmas * fp8 / (fp32 / 2)
    assert round(equivalent, -4) == 970_000 and "about 970,000" in flat
    assert 0.2 < equivalent / step < 0.25 and "close to a quarter" in flat
    assert fmas // 256 == 64 and "another 64 per thread" in flat  # eight warps
    assert round(100 * 4 / 128, 1) == 3.1 and "3.1% on top of" in flat
    assert 4096 * (4096 // 128) * 4 == 512 * 1024 and "512 KiB of `a_scale`" in flat
    assert (4096 // 128) ** 2 * 4 == 4 * 1024 and "4 KiB of `b_scale`" in flat


# --- the measured errors ------------------------------------------------------------------


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _scaling_cells(label: str, scheme: str, size: str, rows: list[dict]) -> list[str]:
    by = {r["data"]: r for r in rows if r["scheme"] == scheme and r["size"] == size}
    g, o = by["gaussian"], by["outliers"]
    cells = [f"{r[key]:.2e}" for r in (g, o) for key in ("rel_frobenius", "worst_row")]
    return [label, *cells, f"{100 * o['underflow_a']:.2f}%"]


LABELS = {"bf16, no scales": "bf16, no scales", "e4m3 per tensor": "e4m3 per tensor",
          "e4m3 per row": "e4m3 per row",
          "e4m3 per block (1x128, 128x128)": "e4m3 per block (1x128, 128x128)",
          "e5m2 per tensor": "e5m2 per tensor"}  # fmt: skip


def test_the_error_tables_are_the_recorded_run(chapter: Chapter) -> None:
    text, flat, run = _text(chapter), _flat(chapter), _errors()
    assert run["setup"]["bits"] == 13 and run["setup"]["step"] == 32
    assert "CPU only" in run["setup"]["machine"]
    for scheme, label in LABELS.items():
        assert _row(_scaling_cells(label, scheme, "256x256x4096", run["scaling"])) in text, label
    acc = run["accumulation"]
    for sums in ("fp32, promoted every 128", "13 bits, promoted every 128",
                 "13 bits, promoted every 512", "13 bits, never promoted"):  # fmt: skip
        cells = [sums]
        for k in (1024, 4096, 16384):
            r = next(r for r in acc if r["sums"] == sums and r["size"] == f"256x256x{k}")
            cells.append(f"{r['rel_frobenius']:.2e}")
        assert _row(cells) in text, sums
    per = {r["scheme"]: r for r in run["scaling"]
           if r["size"] == "256x256x4096" and r["data"] == "outliers"}  # fmt: skip
    tensor, row = per["e4m3 per tensor"], per["e4m3 per row"]
    block = per["e4m3 per block (1x128, 128x128)"]
    assert block["worst_row"] < row["worst_row"] < tensor["worst_row"]
    assert f"loses {100 * tensor['underflow_a']:.2f}%" in flat
    assert f"worst row errs by {tensor['worst_row']:.2e}" in flat
    assert f"back to {row['worst_row']:.2e}" in flat and f"best, {block['worst_row']:.2e}" in flat
    never = [r["rel_frobenius"] for r in acc if r["sums"] == "13 bits, never promoted"]
    every = [r["rel_frobenius"] for r in acc if r["sums"] == "13 bits, promoted every 128"]
    assert never[0] < never[1] < never[2] and max(every) / min(every) < 1.01
    growth = [later / earlier for earlier, later in zip(never, never[1:], strict=False)]
    assert all(3.5 < g < 4.5 for g in growth) and "about four times per fourfold `K`" in flat
    bf16 = next(r for r in run["scaling"] if r["scheme"] == "bf16, no scales"
                and r["size"] == "256x256x4096" and r["data"] == "gaussian")  # fmt: skip
    e4m3 = [r["rel_frobenius"] for r in run["scaling"] if r["scheme"].startswith("e4m3")
            and r["size"] == "256x256x4096" and r["data"] == "gaussian"]  # fmt: skip
    assert all(round(e / bf16["rel_frobenius"]) == 16 for e in e4m3)
    assert "Sixteen times the error of bf16" in flat and "near 3.7% relative error" in flat
    assert f"{never[2]:.1%}" == "2.5%" and "At `K = 16384` it reaches 2.5%" in flat
    assert f"{every[0]:.1e}" == "2.4e-04" and "a fixed 2.4e-04" in flat
    for name in ("bench/RESULTS.md", "bench/results/fp8_error.json", "bench/fp8_error.py"):
        assert f"`{name}`" in text, name


def test_the_results_log_says_the_same() -> None:
    log = (ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    section = log.split(RUN_HEAD, 1)[1].split("\n## ", 1)[0]
    run = _errors()
    assert f"`{run['setup']['commit']}`" in section
    assert "python bench/fp8_error.py --json bench/results/fp8_error.json" in section
    for scheme in LABELS:
        cells = _scaling_cells(scheme.replace("e4m3 ", ""), scheme, "256x256x4096", run["scaling"])
        if scheme.startswith("e5m2"):
            cells[0] = scheme
        cells[-1] = "0" if cells[-1] == "0.00%" else cells[-1]
        assert _row(cells) in section, scheme


def test_the_script_still_gives_the_recorded_numbers() -> None:
    """256x256x1024, seed 1, rerun: every row equal to the recorded one."""
    bench = _script()
    run = _errors()
    assert run["formats"] == bench.formats()
    assert run["formats"]["e4m3"]["max"] == 448.0 and run["formats"]["e5m2"]["max"] == 57344.0
    again = bench.scaling_rows("gaussian", 256, 256, 1024, run["setup"]["seed"])
    again += bench.accumulation_rows(256, 256, 1024, run["setup"]["seed"])
    recorded = [r for r in run["scaling"] + run["accumulation"]
                if r["size"] == "256x256x1024" and r["data"] == "gaussian"]  # fmt: skip
    assert len(again) == len(recorded) == 10
    for new, old in zip(again, recorded, strict=True):
        assert new.keys() == old.keys()
        for key, value in new.items():
            if isinstance(value, str):
                assert value == old[key], key
            else:
                assert value == pytest.approx(old[key], rel=1e-9), (new.get("scheme"), key)


def test_the_script_refuses_bad_sizes_in_words() -> None:
    bench = _script()
    with pytest.raises(SystemExit):
        bench.main(["--sizes", "256x200x1024"])
    with pytest.raises(ValueError, match="unknown data set"):
        bench.operands("uniform", 1, 128, 128, 0)


# --- the problem, its code and its wrong kernels -------------------------------------------


def test_the_contract_is_the_problems(chapter: Chapter) -> None:
    flat = _flat(chapter)
    problem = tomllib.loads((FP8 / "problem.toml").read_text())
    shapes = {a["name"]: a.get("shape") for a in problem["args"]}
    assert shapes["A"] == ["M", "K"] and shapes["B"] == ["N", "K"] and shapes["C"] == ["M", "N"]
    assert shapes["a_scale"] == ["M", "ceil_div(K, 128)"]
    assert shapes["b_scale"] == ["ceil_div(N, 128)", "ceil_div(K, 128)"]
    assert "`a_scale` is `M x ceil(K / 128)` float32" in flat
    assert "`b_scale` is `ceil(N / 128) x ceil(K / 128)` float32" in flat
    assert {a["dtype"] for a in problem["args"] if a["name"] in "AB"} == {"float8_e4m3fn"}
    assert "torch._scaled_mm" in problem["baseline"]["name"] and "`torch._scaled_mm`" in flat
    cases = [t["name"].replace("x", " x ") for t in problem["tests"]]
    cpu = [c for c, t in zip(cases, problem["tests"], strict=True) if t.get("simulate", True)]
    gpu = [c for c in cases if c not in cpu]
    assert f"{cpu[0]}, {cpu[1]}, {cpu[2]} and {cpu[3]} on any machine" in flat
    assert f"{gpu[0]} and {gpu[1]} on a GPU only" in flat
    assert "about 13 are kept" in (FP8 / "problem.toml").read_text() and "atol = 0.125" in flat
    assert problem["tolerance"]["bfloat16"]["atol"] == 0.125
    checks = (ROOT / "tests" / "kernels" / "test_gemm_fp8.py").read_text()
    assert "_short_sums(x, 13)" in checks and 'not compare("C", _short_sums(x, 7)' in checks


def test_the_code_and_files_named_are_the_shipped_ones(chapter: Chapter) -> None:
    text = _text(chapter)
    shipped = {p.name for p in FP8.glob("*/*/*.triton.py")} | {"gemm_fp8.triton.py"}
    named = set(re.findall(r"`([a-z0-9_]+\.triton\.py)`", text))
    assert named == shipped - {"gemm_fp8.triton.py"} and len(named) == 3
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)  # type: ignore[union-attr]
    source = (FP8 / "solutions" / "correct" / "gemm_fp8_blockscaled.triton.py").read_text()
    for line in block.strip().splitlines():
        assert line.strip() in source, line
    starter = load_catalog()["gemm_fp8"].starter("triton")
    assert "BLOCK_M=128 BLOCK_N=128 BLOCK_K=128" in starter and "TODO" in starter


def test_the_wrong_kernels_fail_where_the_chapter_says(chapter: Chapter) -> None:
    flat = _flat(chapter)
    checks = json.loads((RESULTS / "gemm_fp8_interpreter_checks.json").read_text())
    runs = checks["runs"]
    assert runs["gemm_fp8_blockscaled.triton.py"]["state"] == "done"
    assert all(c["ok"] for c in runs["gemm_fp8_blockscaled.triton.py"]["cases"])
    for name in ("gemm_fp8_scaled_once.triton.py", "gemm_fp8_b_scale_transposed.triton.py"):
        run = runs[name]
        assert run["state"] == "wrong"
        assert [(c["name"], c["ok"]) for c in run["cases"]] == [
            ("1x128x128", True), ("17x256x384", False)]  # fmt: skip
        wrong = run["cases"][1]["mismatches"]
        assert f"{wrong} of 4352 elements wrong" in run["message"]
        assert f"{wrong} of 4352 elements wrong" in flat
    assert 17 * 256 == 4352
    # b_scale is 2 x 3 at 17 x 256 x 384: block (0, 1) is element 1, read at kb * 2 + nb = 2.
    assert (0 * 3 + 1, 1 * 2 + 0) == (1, 2) and "element 1, is read from element 2" in flat
    # With one block of N or of K, the wrong index is the right one, on every block.
    for n_blocks, k_blocks in ((1, 5), (3, 1)):
        for nb in range(n_blocks):
            for kb in range(k_blocks):
                assert kb * n_blocks + nb == nb * k_blocks + kb


# --- Triton, links and terms ---------------------------------------------------------------


def test_the_triton_knob_is_as_described(chapter: Chapter) -> None:
    import triton.language as tl
    from triton.backends.nvidia import compiler as nvidia
    from triton.language import semantic

    assert "max_num_imprecise_acc" in inspect.signature(tl.dot).parameters
    assert "2**30 if capability == 90" in inspect.getsource(nvidia)
    assert "must be <= K" in inspect.getsource(semantic)
    assert "In the installed Triton its default on sm_90 is 2^30" in _flat(chapter)


def test_links_reach_chapters_and_new_terms_are_used(chapter: Chapter) -> None:
    book = Book(Settings().book_dir, load_catalog())
    urls = {c.url for c in book.chapters()}
    links = re.findall(r"\]\((/book/[^)#\s]+)", _text(chapter))
    assert links and all(url in urls for url in links)
    triton = (ROOT / "book" / "p4" / "03-triton-in-depth.md").read_text(encoding="utf-8")
    assert "[IV.6, FP8 GEMM on Hopper](/book/p4/fp8-gemm)" in triton
    terms = {t.name: t for t in load_terms(ROOT / "book")}
    prose = re.sub(r"`[^`]*`", " ", re.sub(r"```.*?```", " ", _text(chapter), flags=re.S))
    for name in NEW_TERMS:
        assert name in terms and terms[name].pattern.search(prose), name
