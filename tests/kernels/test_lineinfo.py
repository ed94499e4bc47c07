"""Source lines of listing rows: nvdisasm's comments, PTX's .loc, MLIR's loc(), LLVM's !dbg."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kplay.kernels.backends.lineinfo import (
    compact_sass_marks,
    learner_file,
    line_map,
    llir_lines,
    mlir_lines,
    ptx_lines,
    sass_lines,
)

DATA = Path(__file__).parent / "data" / "sass"


def _rows_with(text: str, needle: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines()) if needle in line]


def test_the_learner_files_are_the_engines_own_names() -> None:
    assert learner_file("kernel.cu") and learner_file("/tmp/w/nvcc/kernel.cu")
    assert learner_file("/tmp/w/kplay_src.py") and learner_file("kplay_src_3f2a.py")
    assert not learner_file("/usr/local/cuda/include/crt/mma.hpp")
    assert not learner_file("/site-packages/triton/language/standard.py")


def test_wmma_in_sass_and_ptx_maps_to_the_learners_call_not_the_header() -> None:
    # Line 15 of wmma.cu is `wmma::mma_sync(...)`; its code lives in crt/mma.hpp, inlined.
    sass = (DATA / "wmma.sass").read_text()
    ptx = (DATA / "wmma.ptx").read_text()
    smap, pmap = sass_lines(sass), ptx_lines(ptx)
    assert {smap.lines[r] for r in _rows_with(sass, "HMMA")} == {15}
    assert {pmap.lines[r] for r in _rows_with(ptx, "mma.sync")} == {15}
    source_lines = len((DATA / "wmma.cu").read_text().splitlines())
    assert set(smap.source_lines()) <= set(range(1, source_lines + 1))
    assert smap.source_lines() == pmap.source_lines() == [6, 13, 14, 15, 16, 17]


def test_every_tma_instruction_has_a_line_and_rows_of_gives_them_back() -> None:
    sass = (DATA / "tma.sass").read_text()
    smap = sass_lines(sass)
    (load,) = _rows_with(sass, "UTMALDG")
    line = smap.lines[load]
    src = (DATA / "tma.cu").read_text().splitlines()
    # The line that ends the asm statement holding the copy.
    assert "cp.async.bulk.tensor.2d.shared" in "\n".join(src[line - 4 : line])
    assert load in smap.rows_of(line)


NESTED_SASS = """\
.text.nest:
\t//## File "/w/kernel.cu", line 3
        /*0000*/                   LDC R1, c[0x0][0x28] ;
\t//## File "/w/kernel.cu", line 2 inlined at "/w/kernel.cu", line 5
\t//## File "/w/kernel.cu", line 5
        /*0060*/                   HFMA2.MMA R5, -RZ, RZ, 2.125, 0 ;
\t//## File "/w/helper.cuh", line 1 inlined at "/w/kernel.cu", line 2
\t//## File "/w/kernel.cu", line 2 inlined at "/w/kernel.cu", line 5
\t//## File "/w/kernel.cu", line 5
        /*0070*/                   FFMA R0, R0, R0, 1 ;
.L_x_0:
        /*0080*/                   FFMA R5, R0, R5, -2 ;
.text.other:
        /*0000*/                   EXIT ;
"""


def test_sass_inlining_gives_the_innermost_learner_line_and_its_callers() -> None:
    smap = sass_lines(NESTED_SASS)
    assert smap.lines == {2: 3, 5: 2, 9: 2, 11: 2}
    assert smap.via == {5: [5], 9: [5], 11: [5]}
    # A new function starts without a line until its first comment.
    assert 13 not in smap.lines


DEEP_SASS = """\
.text.gemm:
\t//## File "/inc/cute/tensor_impl.hpp", line 241 inlined at "/inc/cute/algorithm/copy.hpp", line 90
\t//## File "/inc/cute/algorithm/copy.hpp", line 90 inlined at "/inc/cutlass/gemm/mma.hpp", line 77
\t//## File "/inc/cutlass/gemm/mma.hpp", line 77 inlined at "kernel.cu", line 125
\t//## File "kernel.cu", line 125
        /*0000*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ ;
\t//## File "/inc/cute/tensor_impl.hpp", line 241 inlined at "/inc/cute/algorithm/copy.hpp", line 91
\t//## File "/inc/cute/algorithm/copy.hpp", line 91 inlined at "/inc/cutlass/gemm/mma.hpp", line 77
\t//## File "/inc/cutlass/gemm/mma.hpp", line 77 inlined at "kernel.cu", line 125
\t//## File "kernel.cu", line 125
        /*0010*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24 ;
\t//## File "/inc/cute/arch/util.hpp", line 12
        /*0020*/                   NOP ;
.text.other:
\t//## File "/inc/cute/arch/util.hpp", line 12
        /*0000*/                   EXIT ;
"""


def test_compacting_keeps_the_learners_lines_and_drops_the_header_chain() -> None:
    compact = compact_sass_marks(DEEP_SASS)
    assert compact.splitlines() == [
        ".text.gemm:",
        '\t//## File "/inc/cutlass/gemm/mma.hpp", line 77 inlined at "kernel.cu", line 125',
        '\t//## File "kernel.cu", line 125',
        "        /*0000*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ ;",
        # The same learner lines again: the location has not changed for a reader.
        "        /*0010*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24 ;",
        '\t//## File "/inc/cute/arch/util.hpp", line 12',
        "        /*0020*/                   NOP ;",
        ".text.other:",
        '\t//## File "/inc/cute/arch/util.hpp", line 12',  # a new function states it again
        "        /*0000*/                   EXIT ;",
    ]

    def by_text(text: str) -> dict[str, int | None]:
        found = sass_lines(text)
        return {t.strip(): found.lines.get(i) for i, t in enumerate(text.splitlines()) if "/*" in t}

    assert by_text(compact) == by_text(DEEP_SASS)
    assert list(by_text(compact).values()) == [125, 125, None, None]

    assert compact_sass_marks(NESTED_SASS) == NESTED_SASS  # every comment there names kernel.cu


NESTED_PTX = """\
.visible .entry nest(
\t.param .u64 nest_param_0
)
{
\t.loc\t1 3 0
\tld.param.u64 \t%rd1, [nest_param_0];
\t.loc\t1 2 73, function_name $L__info_string0, inlined_at 1 5 5
\t.loc\t2 2 73, function_name $L__info_string1, inlined_at 1 2 73
\t.loc\t2 1 73, function_name $L__info_string2, inlined_at 2 2 73
\tfma.rn.f32 \t%f2, %f1, %f1, 0f3F800000;
$L__BB0_1:
\t@%p1 bra \t$L__BB0_1;
\t.loc\t1 6 1
\tret;
}
\t.file\t1 "/w/kernel.cu"
\t.file\t2 "/w/helper.cuh"
"""


def test_ptx_follows_inlined_at_through_a_header_back_to_the_kernel() -> None:
    pmap = ptx_lines(NESTED_PTX)
    assert pmap.lines == {5: 3, 9: 2, 11: 2, 13: 6}
    assert pmap.via == {9: [5], 11: [5]}


TTIR = """\
#loc = loc("/w/kplay_src.py":6:0)
module {
  tt.func public @add(%x: !tt.ptr<f32> loc("x"(#loc))) {
    %pid = tt.get_program_id x : i32 loc(#loc5)
    %y = tt.call @helper(%pid) : (i32) -> i32 loc(#loc7)
    %z = arith.muli %pid, %pid : i32 loc(callsite(#loc3 at #loc4))
    %w = arith.addi %z, %z : i32 loc(#loc1)
    tt.return loc(#loc6)
  } loc(#loc)
} loc(#loc)
#loc1 = loc(unknown)
#loc2 = loc("/w/kplay_src.py":7:24)
#loc3 = loc("/site-packages/triton/language/standard.py":40:11)
#loc4 = loc("/w/kplay_src.py":9:8)
#loc5 = loc("pid"(#loc2))
#loc6 = loc("/w/kplay_src.py":12:4)
#loc7 = loc(fused[#loc4, #loc2])
"""


def test_mlir_locations_resolve_through_aliases_names_and_callsites() -> None:
    mmap = mlir_lines(TTIR)
    assert mmap.lines == {2: 6, 3: 7, 4: 9, 5: 9, 7: 12, 8: 6, 9: 6}
    assert mmap.via == {4: [7]}
    assert line_map("ttgir", TTIR).lines == mmap.lines


LLIR = """\
define ptx_kernel void @add(ptr addrspace(1) %0) !dbg !4 {
  %2 = tail call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x(), !dbg !12
  %3 = shl i32 %2, 10, !dbg !13
  %4 = fadd float %a, %b, !dbg !15
  ret void, !dbg !16
}
!1 = !DIFile(filename: "kplay_src.py", directory: "/w")
!2 = !DIFile(filename: "standard.py", directory: "/site-packages/triton/language")
!4 = distinct !DISubprogram(name: "add", linkageName: "add", scope: !1, file: !1, line: 6)
!5 = distinct !DISubprogram(name: "helper", scope: !2, file: !2, line: 30)
!6 = distinct !DILexicalBlockFile(scope: !4, file: !1, discriminator: 0)
!12 = !DILocation(line: 7, column: 24, scope: !4)
!13 = !DILocation(line: 8, column: 17, scope: !6)
!14 = !DILocation(line: 10, column: 5, scope: !4)
!15 = !DILocation(line: 31, column: 12, scope: !5, inlinedAt: !14)
!16 = !DILocation(line: 12, column: 4, scope: !4)
"""


def test_llvm_locations_find_their_file_through_scopes_and_inlining() -> None:
    lmap = llir_lines(LLIR)
    assert lmap.lines == {1: 7, 2: 8, 3: 10, 4: 12}
    assert lmap.via == {}


def test_an_unknown_listing_maps_nothing() -> None:
    assert line_map("cubin", "anything").lines == {}


_TRITON_SCRIPT = """
import json, sys, triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
sys.path.insert(0, sys.argv[1])
from kplay_src import add
src = ASTSource(add, {"x": "*fp32", "y": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {(3,): 256})
asm = triton.compile(src, target=GPUTarget("cuda", 90, 32)).asm
json.dump({k: asm[k] for k in ("ttir", "ttgir", "llir", "ptx")}, sys.stdout)
"""
_TRITON_KERNEL = """import triton
import triton.language as tl


@triton.jit
def add(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = offs < n
    total = tl.load(x + offs, mask=keep) + tl.load(y + offs, mask=keep)
    tl.store(y + offs, tl.sum(total, axis=0) + total, mask=keep)
"""


@pytest.mark.slow
def test_each_triton_listing_maps_back_to_the_kernels_lines(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    (tmp_path / "kplay_src.py").write_text(_TRITON_KERNEL)
    env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-c", _TRITON_SCRIPT, str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=240, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"Triton cannot compile for sm_90 here: {done.stderr[-400:]}")
    listings = json.loads(done.stdout)
    for kind, text in listings.items():
        found = line_map(kind, text)
        # The load line (9) and the store line (10) of the kernel appear in every listing.
        assert {9, 10} <= set(found.source_lines()), kind
        assert set(found.source_lines()) <= set(range(6, 11)), kind
