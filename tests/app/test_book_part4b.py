"""Part IV, chapters 4-5 (CUTLASS/CuTe in C++, the CuTe DSL): they render with real cells; the
files, code and build-ups they describe are the shipped ones; CuTe (built here by nvcc) computes
their layout algebra; the wrong-kernel answers follow from the checker; the figures are recorded."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
import tomllib
import xml.dom.minidom
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from kplay.app.book import Book, Chapter
from kplay.config import Settings
from kplay.kernels.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = ROOT / "kernels" / "problems" / "gemm_bf16"
CORRECT = PROBLEM / "solutions" / "correct"
CH4, CH5 = "04-cutlass-cute.md", "05-cute-dsl.md"
SLUGS = {"cutlass-cute": CH4, "cute-dsl": CH5}
BACKENDS = {"cutlass-cute": ("cutlass", ".cutlass.cu"), "cute-dsl": ("cute-dsl", ".cute.py")}
SECTIONS = ("In this chapter you will", "Exercise", "What the roofline says", "Further reading")


def _text(name: str) -> str:
    return (ROOT / "book" / "p4" / name).read_text(encoding="utf-8")


def _block(name: str, lang: str, marker: str) -> str:
    """The one fenced `lang` block of book/p4/`name` that contains `marker`."""
    blocks = [b for b in re.findall(rf"```{lang}\n(.*?)```", _text(name), re.S) if marker in b]
    assert len(blocks) == 1, f"{name}: {len(blocks)} {lang} blocks with {marker!r}"
    return blocks[0]


@pytest.fixture(scope="module")
def chapters() -> dict[str, Chapter]:
    book = Book(Settings().book_dir, load_catalog())
    found = {c.slug: c for c in book.chapters() if c.part == 4 and c.slug in SLUGS}
    assert set(found) == set(SLUGS), "book/p4 needs its part.toml for these chapters to show"
    return found


def test_chapters_are_in_part_four_in_order(chapters: dict[str, Chapter]) -> None:
    assert [(int(chapters[s].number), chapters[s].path.name) for s in SLUGS] == [(4, CH4), (5, CH5)]
    for name in SLUGS.values():
        assert 250 <= len(_text(name).splitlines()) <= 400, name
    figures = re.findall(r"!\[[^\]]+\]\((/static/book/p4-04-[\w-]+\.svg)\)", _text(CH4))
    for svg in [(ROOT / url.lstrip("/")).read_text(encoding="utf-8") for url in figures] or [""]:
        xml.dom.minidom.parseString(svg)  # the figures exist, parse, and suit both themes
        assert "currentColor" in svg and "<title>" in svg and "aria-label" in svg
        assert not re.search(r'fill="(#fff|#ffffff|white|black|#000)"', svg, re.I)


def test_chapters_render_with_their_cells(client: TestClient, chapters: dict[str, Chapter]) -> None:
    for chapter in chapters.values():
        page = client.get(f"/book/p4/{chapter.slug}")
        assert page.status_code == 200, chapter.slug
        for heading in SECTIONS:
            assert heading in page.text, (chapter.slug, heading)
        assert chapter.cells and all(f'data-cell="{c.id}"' in page.text for c in chapter.cells)
        assert "not yet measured" not in page.text


def test_cells_open_the_real_starters(chapters: dict[str, Chapter]) -> None:
    catalog = load_catalog()
    for slug, chapter in chapters.items():
        backend, suffix = BACKENDS[slug]
        (cell,) = chapter.cells
        assert (cell.problem, cell.backend, cell.backends) == ("gemm_bf16", backend, (backend,))
        starter = (PROBLEM / "starter" / f"gemm_bf16{suffix}").read_text(encoding="utf-8")
        assert catalog["gemm_bf16"].starter(backend) == starter


def test_every_kernel_file_named_ships() -> None:
    shipped = {p.name for p in (PROBLEM / "solutions").glob("*/*")}
    shipped |= {p.name for p in (PROBLEM / "starter").iterdir()}
    for name in SLUGS.values():
        named = set(re.findall(r"`([a-z0-9_]+\.(?:cutlass\.cu|cute\.py|cu))`", _text(name)))
        assert named, name
        assert named <= shipped, f"{name} names {sorted(named - shipped)}, not shipped"
    for path in ("kernels/backends/cute_dsl.py", "kernels/backends/cute_dsl_image.py"):
        assert (ROOT / path).is_file() and f"`{path}`" in _text(CH5)


def _assert_quoted(block: str, source: Path, comment: str) -> None:
    text = source.read_text(encoding="utf-8")
    for line in block.splitlines():
        code = line.split(comment)[0].strip()
        if code:
            assert code in text, f"quoted {code!r} is not in {source.name}"


def test_quoted_code_is_in_the_shipped_files() -> None:
    for marker, source in (
        ("Tensor mA", PROBLEM / "starter" / "gemm_bf16.cutlass.cu"),
        ("TiledMMA mma", CORRECT / "gemm_bf16_cute_mma.cutlass.cu"),
        ("using CopyA", CORRECT / "gemm_bf16_collective.cutlass.cu"),
    ):
        _assert_quoted(_block(CH4, "cuda", marker), source, "//")
    mma_py = CORRECT / "gemm_bf16_mma.cute.py"
    for marker in ("a = zero", "cute.make_tiled_mma"):
        _assert_quoted(_block(CH5, "python", marker), mma_py, "#")
    shipped = mma_py.read_text(encoding="utf-8")
    assert "zero = cutlass.BFloat16(0.0)" in shipped and "smem=9696" in shipped


def test_what_each_cell_is_built_from_is_what_its_source_uses() -> None:
    src = {p.name: p.read_text(encoding="utf-8") for p in CORRECT.glob("*.cutlass.cu")}
    assert len(src) == 4
    assert not any("CollectiveBuilder" in s for s in src.values())  # "none uses the builder"
    users = {name for name, s in src.items() if "CollectiveMma<" in s}
    assert users == {"gemm_bf16_collective.cutlass.cu"}
    assert "MainloopSm90CpAsyncGmmaWarpSpecialized<\n        kStages" in src[next(iter(users))]
    for name in ("gemm_bf16_tma_simple.cutlass.cu", "gemm_bf16_tma_ws.cutlass.cu"):
        assert "SM90_TMA_LOAD_2D::copy" in src[name] and "ClusterTransactionBarrier" in src[name]
        assert "tma.A=(128,64) tma.A.swizzle=128B" in src[name]
    fast = src["gemm_bf16_tma_ws.cutlass.cu"]
    for used in ("warpgroup_reg_dealloc<40>", "warpgroup_reg_alloc<232>", "warpgroup_wait<1>",
                 "kGroupM = 8", "min(132,", "SM90_64x256x16_F32BF16BF16_SS"):  # fmt: skip
        assert used in fast, used
    assert "warpgroup_wait<0>();  // this stage is read" in src["gemm_bf16_tma_simple.cutlass.cu"]
    assert "SM80_16x8x16_F32BF16BF16F32_TN" in src["gemm_bf16_cute_mma.cutlass.cu"]
    dsl = (CORRECT / "gemm_bf16_tiled.cute.py").read_text(encoding="utf-8")
    assert "MmaF16BF16Op" not in dsl and ".to(cutlass.Float32)" in dsl
    image = (ROOT / "kernels" / "backends" / "cute_dsl_image.py").read_text(encoding="utf-8")
    assert "launchKernel(" in image and "cluster" not in image.lower()  # no cluster launch


# --- the layout algebra -----------------------------------------------------------------------

ROW = re.compile(r"^\| `(\w+)\((.*)\)` \| `([^`]+)` \|", re.M)


def _layout_rows() -> list[tuple[str, list[str], str]]:
    rows = []
    for op, args, result in ROW.findall(_text(CH4)):
        parts, depth, start = [], 0, 0
        for i, ch in enumerate(args):
            depth += (ch in "(<") - (ch in ")>")
            if ch == "," and depth == 0:
                parts.append(args[start:i].strip())
                start = i + 1
        rows.append((op, [*parts, args[start:].strip()], result))
    assert len(rows) == 7, "the chapter's table of layout operations"
    return rows


def _py(layout: str) -> tuple[Any, Any]:
    shape, stride = layout.split(":")
    return ast.literal_eval(shape), ast.literal_eval(stride)


@pytest.fixture(scope="module")
def layouts() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(_block(CH4, "python", "def crd2idx"), namespace)
    return namespace


def test_the_worked_layouts_follow_the_evaluation_rule(layouts: dict[str, Any]) -> None:
    idx, size = layouts["crd2idx"], layouts["size"]

    def at(layout: str | tuple[Any, Any], *coords: Any) -> list[int]:
        shape, stride = _py(layout) if isinstance(layout, str) else layout
        return [idx(c, shape, stride) for c in coords]

    assert at("(4,8):(8,1)", (2, 3), 13) == [19, 11] and at("(4,8):(1,4)", (2, 3)) == [14]
    assert at("(4,2):(8,1)", 0)[0] + 36 == at("(8,8):(8,1)", (4, 4))[0]  # local_tile at (1,2)
    five = [x + 9 for x in at("(4,2):(16,4)", *range(8))]  # thread 5 starts at (1,1): 9
    assert five == [9, 25, 41, 57, 13, 29, 45, 61] and "9, 25, 41, 57, 13, 29, 45, 61" in _text(CH4)
    for op, args, result in _layout_rows():
        a, got = _py(args[0]), _py(result)
        n = size(a[0])
        if op == "coalesce":
            assert at(got, *range(n)) == at(a, *range(n))
        elif op == "composition":
            b = _py(args[1])
            assert at(got, *range(size(b[0]))) == at(a, *at(b, *range(size(b[0]))))
        elif op == "complement":
            cover = sorted(i + j for i in at(a, *range(n)) for j in at(got, *range(size(got[0]))))
            assert cover == list(range(int(args[1]))), (op, args)
        elif op == "logical_divide":
            t = _py(args[1])
            firsts = [(x, 0) for x in range(size(t[0]))]
            assert at(got, *firsts) == at(a, *at(t, *range(size(t[0]))))
            assert sorted(at(got, *range(n))) == list(range(n))
        else:  # zipped_divide by <4,2>: ((inside a tile), (which tile))
            for i, j, p, q in np.ndindex(4, 2, 2, 4):
                assert at(got, ((i, j), (p, q))) == at(a, (4 * p + i, 2 * q + j))


def _cpp_layout(text: str) -> str:
    if text.startswith("<"):
        return "Shape<" + ",".join(f"_{n}" for n in text[1:-1].split(",")) + ">{}"
    if ":" not in text:
        return f"Int<{text}>{{}}"

    def typ(v: Any, kind: str) -> str:
        return f"_{v}" if isinstance(v, int) else f"{kind}<{','.join(typ(x, kind) for x in v)}>"

    shape, stride = _py(text)
    if isinstance(shape, int):
        return f"Layout<_{shape},_{stride}>{{}}"
    return f"Layout<{typ(shape, 'Shape')},{typ(stride, 'Stride')}>{{}}"


def _program() -> str:
    body = [f'  SHOW("row{i}", {op}({", ".join(map(_cpp_layout, args))}));'
            for i, (op, args, _) in enumerate(_layout_rows())]  # fmt: skip
    builder, fused = _block(CH4, "cuda", "CollectiveBuilder<"), _block(CH4, "cuda", "Sm90EVT")
    return PROGRAM.format(fused=fused, builder=builder, rows="\n".join(body))


PROGRAM = r"""#include <cstdio>
#include <cutlass/cutlass.h>
#include <cute/tensor.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/thread/activation.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
using namespace cute;
using ElementAB = cutlass::bfloat16_t;
using RowMajor = cutlass::layout::RowMajor;
using TileShape = Shape<_128, _256, _64>;
template <class Fusion>
using EpilogueOf = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, Shape<_1, _1, _1>,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float, float, RowMajor, 4,
    float, RowMajor, 4, cutlass::epilogue::TmaWarpSpecializedCooperative, Fusion>::CollectiveOp;
using Epilogue =
    EpilogueOf<cutlass::epilogue::fusion::LinearCombination<float, float, float, float>>;
{builder}
namespace evt {{
{fused}
using FusedEpilogue = EpilogueOf<Fused>;
}}
#define SHOW(key, x) (printf(key " "), print(x), printf("\n"))
int main() {{
{rows}
  auto m = make_tensor(counting_iterator<int>(0), Layout<Shape<_8, _8>, Stride<_8, _1>>{{}});
  auto tile = local_tile(m, Shape<_4, _2>{{}}, make_coord(1, 2));
  printf("tile "); print(tile.layout()); printf(" at %d\n", int(tile(0, 0)));
  SHOW("walk", local_tile(m, Shape<_4, _2>{{}}, make_coord(1, _)).layout());
  SHOW("part", local_partition(m, Layout<Shape<_2, _4>, Stride<_4, _1>>{{}}, 5).layout());
  TiledMMA mma = make_tiled_mma(SM80_16x8x16_F32BF16BF16F32_TN{{}}, Layout<Shape<_2, _2, _1>>{{}});
  SHOW("acc80", partition_fragment_C(mma, Shape<_64, _64>{{}}).layout());
  auto wg = make_tiled_mma(SM90_64x256x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::MN>{{}},
                           Layout<Shape<_2, _1, _1>>{{}});
  SHOW("acc90", partition_fragment_C(wg, Shape<_128, _256>{{}}).layout());
  SHOW("swizzle", GMMA::Layout_K_SW128_Atom<ElementAB>{{}});
  printf("stages %d\n", int(Mainloop::DispatchPolicy::Stages));
  printf("bytes %zu %zu %d\n", sizeof(typename Mainloop::SharedStorage),
         sizeof(typename Epilogue::SharedStorage), int(Kernel::MaxThreadsPerBlock));
  printf("fused %zu\n", sizeof(typename evt::FusedEpilogue::SharedStorage));
  typename evt::Fused::Arguments fused_args{{}};
  return sizeof(fused_args) == 0;
}}
"""


@pytest.mark.slow
def test_cute_computes_what_the_chapter_says(tmp_path: Path) -> None:
    """One nvcc build: the table's algebra, the prose's tiles, and its builder and EVT code."""
    from kplay.kernels.backends.cutlass import _nvcc
    from kplay.kernels.backends.cutlass_build import find_headers

    headers, nvcc = find_headers(), _nvcc()
    if headers is None or nvcc is None:
        pytest.skip("needs nvcc and the CUTLASS headers (the nvidia-cutlass wheel)")
    (tmp_path / "book.cu").write_text(_program())
    cmd = [str(nvcc), "-arch=sm_90a", "-std=c++17", "--expt-relaxed-constexpr",
           *headers.flags(), "-o", "book", "book.cu"]  # fmt: skip
    built = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    ran = subprocess.run([str(tmp_path / "book")], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    out = dict(line.split(" ", 1) for line in ran.stdout.replace("_", "").splitlines())
    for i, (_, _, result) in enumerate(_layout_rows()):
        assert out[f"row{i}"] == result, (i, out[f"row{i}"], result)
    text = _text(CH4)
    assert out["tile"] == "(4,2):(8,1) at 36" and out["walk"] == "(4,2,4):(8,1,2)"
    assert out["part"] == "(4,2):(16,4)" and "gets `(4,2):(16,4)`" in text
    assert out["acc80"] == "((2,2),2,4):((1,2),4,8)" and "`((2,2),2,4)`" in text
    assert out["acc90"].startswith("((2,2,32),1,1):") and "`((2,2,32),1,1)`" in text
    assert out["swizzle"].startswith("Sw<3,4,3> o") and out["swizzle"].endswith("(8,64):(64,1)")
    assert "`Sw<3,4,3> o (8,64):(64,1)`" in text
    assert out["stages"] == "3" and "**3 stages** of 48 KiB" in text
    mainloop, epilogue, threads = (int(x) for x in out["bytes"].split())
    assert mainloop // 3 // 1024 == 48 and epilogue // 1024 == 66 and threads == 384
    assert "66 KiB" in text and int(out["fused"]) > 0


# --- the wrong kernels ------------------------------------------------------------------------


def test_the_answers_to_the_wrong_kernels_follow_from_the_checker() -> None:
    import ml_dtypes

    from kplay.kernels.draws import Draws

    spec = importlib.util.spec_from_file_location("gemm_bf16_ref", PROBLEM / "reference.py")
    ref = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(ref)  # type: ignore[union-attr]
    problem = tomllib.loads((PROBLEM / "problem.toml").read_text(encoding="utf-8"))
    tol = problem["tolerance"]["float32"]
    fails: dict[str, dict[str, int]] = {"short": {}, "rounded": {}}
    for case in problem["tests"]:
        params = case["params"]
        inputs = ref.generate(params, Draws(case["seed"]))
        want = ref.reference(inputs, params)["C"].astype(np.float64)
        a, b = (inputs[x].astype(np.float64) for x in "AB")
        whole = params["K"] // 32 * 32
        got = {
            "short": (a[:, :whole] @ b[:whole]).astype(np.float32),
            "rounded": want.astype(np.float32).astype(ml_dtypes.bfloat16),
        }
        for kind, out in got.items():
            err = np.abs(out.astype(np.float64) - want)
            bad = ~(err <= tol["atol"] + tol["rtol"] * np.abs(want))
            fails[kind][case["name"]] = int(bad.sum())
    assert {n for n, k in fails["short"].items() if k == 0} == {"64x64x64", "128x128x4096"}
    assert all(fails["rounded"].values()) and fails["rounded"]["1x8x8"] == 2
    text = re.sub(r"\s+", " ", _text(CH4))
    assert "64 x 64 x 64 and 128 x 128 x 4096, and fails the other five" in text
    assert "It fails every case, even 1 x 8 x 8 (2 of its 8 elements)" in text
    for name, line in (("k_whole_slices_only", "const int k_tiles = K / 32;"),
                       ("rounded_to_bf16", "tCgC(i) = float(Element(acc(i)))")):  # fmt: skip
        assert line in (PROBLEM / f"solutions/wrong/gemm_bf16_{name}.cutlass.cu").read_text()


# --- measured figures -------------------------------------------------------------------------

RESULTS = ROOT / "bench" / "RESULTS.md"
CUTLASS_RUN = "## 2026-12-04 — H200: CUTLASS TMA + wgmma GEMM past 90% of cuBLAS; CuTe DSL cells"
FIRST_RUN = "## 2026-12-03 (night) — H200: Hopper cells (arch=sm_90a, TMA, clusters)"
DSL_RUN = "## 2026-12-04 — H200: CuTe DSL GEMM cells pass; wrong attention kernels caught"
NO_GPU = "## 2026-12-03: CuTe DSL on a machine without a GPU"


def _section(title: str) -> str:
    return RESULTS.read_text(encoding="utf-8").split(title, 1)[1].split("\n## ", 1)[0]


def test_cutlass_figures_are_the_recorded_ones() -> None:
    row = re.compile(r"^\| \**`?(cuBLAS `gemmEx`|[\w.]+)`?\**[^|]*\| \**([\d.]+)\** \| "
                     r"\**([\d.]+)\** \| \**([\d.]+)\** \|", re.M)  # fmt: skip
    rows = {m[1]: m.group(2, 3, 4) for m in row.finditer(_section(CUTLASS_RUN))}
    lines = _text(CH4).splitlines()
    for name in ("gemm_bf16_tma_ws", "gemm_bf16_tma_simple", "gemm_bf16_collective",
                 "gemm_bf16_cute_mma"):  # fmt: skip
        us, tflops, share = rows[f"{name}.cutlass.cu"]
        line = next(ln for ln in lines if ln.startswith(f"| `{name}.cutlass.cu` |"))
        assert line.endswith(f"| {us} | {tflops} | {share} |"), line
    text = re.sub(r"\s+", " ", _text(CH4))
    assert f"at {rows['cuBLAS `gemmEx`'][0]} µs in the same run" in text
    first = _section(FIRST_RUN)
    assert "compile 14.8 s" in first and "compile 13.6 s" in first
    assert "took 14.8 s to compile and the CuTe `mma.sync` cell 13.6 s" in text
    assert "wgmma 8, TMA load 35, mbarrier 44, setmaxnreg 2" in RESULTS.read_text(encoding="utf-8")
    assert "8 `wgmma`, 35 TMA loads, 44 mbarrier operations and 2 `setmaxnreg`" in text
    ladder = json.loads((ROOT / "bench/results/hopper_ladder_h200.json").read_text())["rows"]
    assert f"reached {ladder['h4@4096']['percent_of_cublas']}% of cuBLAS" in text
    assert f"{rows['cuBLAS `gemmEx`'][0]} and {ladder['cublas@4096']['median_us']} µs" in text


def test_cute_dsl_figures_are_the_recorded_ones() -> None:
    dsl = re.sub(r"\s+", " ", _section(DSL_RUN))
    text = re.sub(r"\s+", " ", _text(CH5))
    found = re.search(r"tiled\.cute\.py` done\*\* \(every case correct; 4096³ in (\d+) µs, "
                      r"([\d.]+) TFLOP/s, ([\d.]+)% of cuBLAS's ([\d.]+) µs", dsl)  # fmt: skip
    assert found, "the SIMT cell's run is not in RESULTS.md"
    us, tflops, share, cublas = found.groups()
    assert f"(CUDA cores, fp32 FMA) | {us} | {tflops} | {share} |" in text
    assert f"with cuBLAS at {cublas} µs in the same run" in text
    mma = re.search(r"mma\.cute\.py` done\*\* \(SM80 16x8x16 bf16 MMA atoms through `cute\.gemm`; "
                    r"(\d+) µs, ([\d.]+) TFLOP/s, ([\d.]+)%\)", dsl)  # fmt: skip
    assert mma, "the MMA cell's run is not in RESULTS.md"
    assert f"| `gemm_bf16_mma.cute.py` (`mma.sync` atoms) | {' | '.join(mma.groups())} |" in text
    assert float(share) < 5 and float(mma[3]) < 5  # "neither reaches the bronze tier"
    tiers = tomllib.loads((PROBLEM / "problem.toml").read_text(encoding="utf-8"))["tiers"]
    assert tiers[0]["percent_of_baseline"] == 5 and "bronze tier (5% of cuBLAS" in text
    no_gpu = re.sub(r"\s+", " ", _section(NO_GPU))
    for figure in ("1.1-1.3 s", "0.21-0.23 s", "225 ms", "3.95 s"):
        assert figure in no_gpu and figure in text, figure
    assert "66.0 TFLOP/s, 8.8% of cuBLAS" in text and "| 2082.5 | 66.0 | 8.8 |" in _text(CH4)
    docs = re.sub(r"\s+", " ", (ROOT / "docs" / "backends.md").read_text(encoding="utf-8"))
    assert "about 10 s for a CuTe kernel and 25 s for the collective GEMM" in docs
    assert "Dynamic shared memory above 48 KiB" in docs
