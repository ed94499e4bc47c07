"""Part III, chapters 4-6 (attention's memory wall, FlashAttention v1, FlashAttention-2 in
Triton): they render through the app, their cells name real problems, solutions and
backends, their figures suit both themes, and the code printed in their prose computes
what the prose says it does (run here against float64 references)."""

from __future__ import annotations

import importlib.util
import math
import re
import sys
import xml.dom.minidom
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from kplay.app.book import Book, Chapter
from kplay.config import Settings
from kplay.kernels.catalog import load_catalog
from kplay.kernels.hardware import has_cuda_gpu, prepare_cpu_fallbacks

ROOT = Path(__file__).resolve().parents[2]
FIGURE = re.compile(r"!\[[^\]]+\]\((/static/book/[^)]+)\)")
SLUGS = ("attention-memory-wall", "flash-attention-v1", "flash-attention-2-triton")
PROBLEM = ROOT / "kernels" / "problems" / "attention_fwd"
CH4 = "04-attention-memory-wall.md"
CH5 = "05-flash-attention-v1.md"
CH6 = "06-flash-attention-2-triton.md"


@pytest.fixture(scope="module")
def chapters() -> dict[str, Chapter]:
    book = Book(Settings().book_dir, load_catalog())
    found = {c.slug: c for c in book.chapters() if c.part == 3 and c.slug in SLUGS}
    assert set(found) == set(SLUGS)
    return found


def _blocks(name: str, lang: str, marker: str) -> str:
    """The one fenced `lang` block of chapter file book/p3/`name` that contains `marker`."""
    text = (ROOT / "book" / "p3" / name).read_text(encoding="utf-8")
    blocks = [b for b in re.findall(rf"```{lang}\n(.*?)```", text, re.S) if marker in b]
    assert len(blocks) == 1, f"{name}: {len(blocks)} {lang} blocks with {marker!r}"
    return blocks[0]


def _module(source: str, tmp_path: Path, name: str) -> ModuleType:
    # Triton reads a kernel's source with inspect, so the code must live in a real file.
    path = tmp_path / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_chapters_are_in_part_three_in_order(chapters: dict[str, Chapter]) -> None:
    numbers = [int(chapters[s].number) for s in SLUGS]
    assert numbers == sorted(numbers) and numbers[0] == 4
    for chapter in chapters.values():
        assert chapter.path.parent.name == "p3"
        assert chapter.path.name.startswith(f"0{chapter.number}-")
        assert len(chapter.path.read_text(encoding="utf-8").splitlines()) <= 400


def test_chapters_render_with_their_cells(client: TestClient, chapters: dict[str, Chapter]) -> None:
    for chapter in chapters.values():
        page = client.get(f"/book/p3/{chapter.slug}")
        assert page.status_code == 200, chapter.slug
        html = page.text
        for heading in ("In this chapter you will", "What the roofline says", "Further reading"):
            assert heading in html, (chapter.slug, heading)
        assert "Exercise" in html, chapter.slug
        assert chapter.cells, f"{chapter.slug} has no kernel cell"
        for cell in chapter.cells:
            assert f'data-cell="{cell.id}"' in html
        # Markers for figures still to be measured stay out of the reader's view.
        assert "MEASURE" not in re.sub(r"<!--.*?-->", "", html, flags=re.S)


def test_cells_name_real_problems_and_backends(chapters: dict[str, Chapter]) -> None:
    catalog = load_catalog()
    for chapter in chapters.values():
        for cell in chapter.cells:
            spec = catalog[cell.problem]
            assert cell.backend in spec.backends
            assert set(cell.backends) <= set(spec.backends)
            assert spec.starter(cell.backend).strip()
    assert "attention_fwd" in {c.problem for ch in chapters.values() for c in ch.cells}


def test_figures_exist_and_suit_both_themes(chapters: dict[str, Chapter]) -> None:
    for chapter in chapters.values():
        urls = FIGURE.findall(chapter.path.read_text(encoding="utf-8"))
        assert urls, f"{chapter.slug} shows no figure"
        for url in urls:
            name = url.rsplit("/", 1)[-1]
            assert name.startswith(f"p3-0{chapter.number}-"), name
            path = ROOT / url.lstrip("/")
            assert path.is_file(), f"{chapter.path.name} shows missing figure {url}"
            svg = path.read_text(encoding="utf-8")
            xml.dom.minidom.parseString(svg)
            assert "currentColor" in svg and "<title>" in svg and "aria-label" in svg
            assert not re.search(r'fill="(#fff|#ffffff|white|black|#000)"', svg, re.I)


def test_solution_files_the_prose_names_exist(chapters: dict[str, Chapter]) -> None:
    shipped = {p.name for p in (PROBLEM / "solutions").glob("*/*")}
    for chapter in chapters.values():
        text = chapter.path.read_text(encoding="utf-8")
        for name in re.findall(r"`([a-z0-9_]+\.(?:triton\.py|cu))`", text):
            assert name in shipped, f"{chapter.path.name} names {name}, not shipped"


# --- the code in the prose ----------------------------------------------------------------


def _reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("attention_ref", PROBLEM / "reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _float64_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> Any:
    """o and lse in float64 for [b, h, n, d] arrays: the problem's own reference."""
    params = dict(zip(("batch", "heads", "seq", "dim"), q.shape, strict=True), causal=causal)
    inputs = {"q": q, "k": k, "v": v, "scale": np.float32(1 / math.sqrt(q.shape[-1]))}
    out = _reference().reference(inputs, params)
    return out["o"], out["lse"]


def test_materialised_attention_matches_the_reference() -> None:
    torch = pytest.importorskip("torch")
    namespace: dict[str, Any] = {}
    exec(_blocks(CH4, "python", "def attention_materialised"), namespace)
    rng = np.random.default_rng(4)
    for n, d, causal in ((1, 64, True), (37, 64, False), (70, 128, True)):
        q, k, v = (rng.normal(size=(2, 3, n, d)) for _ in range(3))
        got = namespace["attention_materialised"](*(torch.from_numpy(a) for a in (q, k, v)), causal)
        want, _ = _float64_attention(q, k, v, causal)
        # The reference rounds the scale to float32, as the kernels receive it.
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)


@pytest.fixture()
def interpreter() -> None:
    """Triton's interpreter where there is no GPU, set before a kernel's module is loaded:
    the chapters' kernels widen their bf16 dot operands there (Triton 3.7's interpreter
    multiplies bf16 tiles as raw integers)."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    prepare_cpu_fallbacks()


CASES = [
    dict(batch=2, heads=3, seq=17, dim=64, causal=True),
    dict(batch=1, heads=2, seq=65, dim=128, causal=False),
    dict(batch=1, heads=1, seq=130, dim=64, causal=True),
    dict(batch=1, heads=1, seq=200, dim=128, causal=False),
]


def _run_triton(kernel: Any, params: dict, seed: int) -> tuple[np.ndarray, ...]:
    import torch

    from kplay.kernels.draws import Draws

    ref = _reference()
    inputs = ref.generate(params, Draws(seed))
    want = ref.reference(inputs, params)
    b, h, n, d = (int(params[k]) for k in ("batch", "heads", "seq", "dim"))
    dev = "cuda" if has_cuda_gpu() else "cpu"
    q, k, v = (
        torch.from_numpy(inputs[x].view(np.int16).copy()).view(torch.bfloat16).to(dev)
        for x in "qkv"
    )
    o = torch.full((b, h, n, d), float("nan"), dtype=torch.bfloat16, device=dev)
    lse = torch.full((b, h, n), float("nan"), dtype=torch.float32, device=dev)
    grid = (math.ceil(n / 64), b * h)
    scale = float(np.float32(inputs["scale"]))
    kernel[grid](q, k, v, o, lse, scale, b, h, n, d, int(params["causal"]),
                 BLOCK_M=64, BLOCK_N=32, HEAD_DIM=d)  # fmt: skip
    return o.float().cpu().numpy(), lse.cpu().numpy(), want["o"], want["lse"]


def _assert_close(o: np.ndarray, lse: np.ndarray, want_o: np.ndarray, want_lse: np.ndarray) -> None:
    # lse: the problem's float32 tolerance. o: two units in bfloat16's last place, since the
    # weights are rounded to bfloat16 once as the operand of the second matmul.
    np.testing.assert_allclose(lse, want_lse, rtol=4e-6, atol=1e-4)
    np.testing.assert_allclose(o, want_o, rtol=2 * 2.0**-7, atol=0)


@pytest.mark.parametrize("params", CASES, ids=lambda p: "s{seq}d{dim}c{causal:d}".format(**p))
def test_two_pass_kernel_of_chapter_4_is_correct(
    params: dict, interpreter: None, tmp_path: Path
) -> None:
    module = _module(_blocks(CH4, "python", "def attention_fwd"), tmp_path, "two_pass_p3")
    _assert_close(*_run_triton(module.attention_fwd, params, seed=7))


def test_online_softmax_of_chapter_5_is_exact_for_any_tiling() -> None:
    namespace: dict[str, Any] = {}
    exec(_blocks(CH5, "python", "def online_attention"), namespace)
    rng = np.random.default_rng(5)
    # Head dims whose 1/sqrt(d) is exact in float32, the reference's scale.
    for n, keys, d, tile in ((1, 1, 64, 16), (5, 37, 64, 8), (9, 200, 256, 64), (4, 65, 16, 1)):
        q = rng.normal(size=(n, d)) * 3
        k = rng.normal(size=(keys, d)) * 3
        k[:, 0] = np.linspace(0, 40, keys)  # the row maximum moves to a later tile
        v = rng.normal(size=(keys, d))
        o, lse = namespace["online_attention"](q, k, v, tile)
        want_o, want_lse = _float64_attention(q[None, None], k[None, None], v[None, None], False)
        np.testing.assert_allclose(o, want_o[0, 0], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(lse, want_lse[0, 0], rtol=1e-12)


@pytest.mark.parametrize("params", CASES, ids=lambda p: "s{seq}d{dim}c{causal:d}".format(**p))
def test_block_pointer_kernel_of_chapter_6_is_correct(
    params: dict, interpreter: None, tmp_path: Path
) -> None:
    module = _module(_blocks(CH6, "python", "def attention_fwd"), tmp_path, "block_ptr_p3")
    tuner = module.attention_fwd
    assert {c.kwargs["BLOCK_N"] for c in tuner.configs} == {64, 128}
    # The kernel under the autotuner, with tiles small enough for the interpreter.
    _assert_close(*_run_triton(tuner.fn, params, seed=11))


@pytest.mark.parametrize("causal", [False, True])
def test_backward_of_chapter_6_matches_autograd(causal: bool) -> None:
    torch = pytest.importorskip("torch")
    namespace: dict[str, Any] = {}
    exec(_blocks(CH6, "python", "def attention_backward"), namespace)
    rng = np.random.default_rng(6)
    for n, d, tile in ((1, 16, 64), (37, 16, 8), (130, 64, 64)):
        q, k, v = (torch.tensor(rng.normal(size=(n, d)), requires_grad=True) for _ in range(3))
        s = (q @ k.T) / math.sqrt(d)
        if causal:
            s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        o = torch.softmax(s, dim=-1) @ v
        do = torch.tensor(rng.normal(size=(n, d)))
        o.backward(do)
        lse = torch.logsumexp(s, dim=-1)
        got = namespace["attention_backward"](
            *(t.detach().numpy() for t in (q, k, v, o, do, lse)), causal, tile
        )
        for mine, want in zip(got, (q.grad, k.grad, v.grad), strict=True):
            np.testing.assert_allclose(mine, want.numpy(), rtol=1e-9, atol=1e-11)


def test_quoted_code_matches_the_shipped_kernels() -> None:
    """What chapters 5 and 6 quote of the shipped solutions is still in them."""
    correct = PROBLEM / "solutions" / "correct"
    cuda = (correct / "flash_v1_mma.cu").read_text(encoding="utf-8")
    for line in _blocks(CH5, "cuda", "pack_bf16").splitlines():
        code = line.split("//")[0].strip()
        assert code in cuda, f"chapter 5 quotes {code!r}, not in flash_v1_mma.cu"
    triton_src = (correct / "flash_fa2.triton.py").read_text(encoding="utf-8")
    for quoted in (
        "tl.num_programs(0) - 1 - tl.program_id(0)",
        "qk_scale = scale * 1.4426950408889634",
        "MASKED: tl.constexpr",
        "tl.math.exp2(qk * qk_scale - m_new[:, None])",
        "tl.maximum(m_i, tl.max(qk, 1) * qk_scale)",
        "m_i * 0.6931471805599453 + tl.log(l_i)",
        "BLOCK_M=128 BLOCK_N=64 HEAD_DIM=dim num_warps=8 num_stages=3",
    ):
        assert quoted in triton_src, f"chapter 6 describes {quoted!r}, not in flash_fa2.triton.py"


# --- measured figures the prose quotes ------------------------------------------------------

PART3_RUN = "## 2026-12-04 — H200: Part III kernels (attention, softmax, LayerNorm, bias + GELU)"


def _attention_rows() -> dict[tuple[str, str], tuple[str, str, str]]:
    """(case, kernel) -> (median ms, TFLOP/s, % of SDPA FlashAttention) from the RESULTS.md run."""
    text = (ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    section = text.split(PART3_RUN, 1)[1].split("\n## ", 1)[0]
    row = re.compile(r"^\| (full|causal) \| (`[^`]+`|SDPA [\w-]+)[^|]*\| ([\d.]+) \| \**(\d+)\** "
                     r"\| \**([\d.]+)\** \|", re.M)  # fmt: skip
    return {(m[1], m[2].strip("`")): (m[3], m[4], m[5]) for m in row.finditer(section)}


def test_attention_timings_in_the_chapters_are_the_recorded_ones() -> None:
    rows = _attention_rows()
    ch5 = (ROOT / "book" / "p3" / CH5).read_text(encoding="utf-8")
    ch6 = (ROOT / "book" / "p3" / CH6).read_text(encoding="utf-8")
    for kernel in ("flash_v1_mma.cu", "flash_v1_mma_wide.cu"):
        line = next(ln for ln in ch5.splitlines() if ln.startswith(f"| `{kernel}`,"))
        for case in ("full", "causal"):
            ms, tflops, share = rows[case, kernel]
            assert f"{ms} ms, {tflops} TFLOP/s, {share}%" in line, (kernel, case)
    for kernel in ("flash_fa2.triton.py", "flash_v1_mma.cu", "flash_v1_mma_wide.cu"):
        line = next(ln for ln in ch6.splitlines() if ln.startswith(f"| `{kernel}`"))
        for case in ("full", "causal"):
            ms, tflops, _ = rows[case, kernel]
            assert f"{ms} ms, {tflops} TFLOP/s" in line, (kernel, case)
    fa2, flash = rows["full", "flash_fa2.triton.py"], rows["full", "SDPA FlashAttention"]
    assert f"{flash[0]} ms, {flash[1]} TFLOP/s" in ch6
    assert round(float(fa2[2])) == 141 and "141% of SDPA's FlashAttention backend" in ch6
