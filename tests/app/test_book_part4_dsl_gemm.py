"""Chapter IV.5's section on the CuTe DSL GEMM outside a cell: its times are the recorded H100
runs, the unwritten tiles it reports are the ones the stricter check recorded, and the bar is
not claimed while any tile is wrong."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
HEAD = "## Outside a cell: the whole design in the DSL, and a check that caught it"
CHECKED = ("bf16_bn", "bf16_bk", "f32_bn")


def _section() -> str:
    text = (ROOT / "book" / "p4" / "05-cute-dsl.md").read_text(encoding="utf-8")
    return text.split(HEAD, 1)[1].split("\n## ", 1)[0]


def _runs(name: str) -> list[dict]:
    return json.loads((RESULTS / f"{name}.json").read_text())["results"]


def test_the_table_is_the_first_run() -> None:
    section = _section()
    rows = {r["size"]: r for r in _runs("cute_dsl_gemm_h100_big_unchecked")}
    for size, run in rows.items():
        ms = run["ms"]
        pct = round(100 * ms["cublas_bf16"] / ms["cute_dsl"], 1)
        assert pct == run["percent_of_cublas_bf16"]
        row = f"| {size}³ | {ms['cute_dsl']:.4f} | {ms['cublas_bf16']:.4f} | {pct} |"
        assert row in section, row
    # That run's error was NaN: the reason its figures are not claimed.
    assert all(r["max_rel_err"] != r["max_rel_err"] for r in rows.values())
    assert "The first run printed its error as NaN" in " ".join(section.split())


def test_the_unwritten_tiles_are_the_checked_runs() -> None:
    section = " ".join(_section().split())
    checks = [_runs(f"cute_dsl_gemm_h100_80gb_hbm3_{v}")[0]["check"] for v in CHECKED]
    unwritten = {c["unwritten"] for c in checks}
    assert len(unwritten) == 1  # the same count with B K-major and with fp32 output
    (count,) = unwritten
    tiles = {c["bad_tiles"] for c in checks}
    assert tiles == {count // (128 * 256)}
    assert all(c["wrong"] == 0 and c["elements"] == 4096 * 4096 for c in checks)
    said = re.search(r"\*\*(\d+) of the (\d+) tiles of 128 x 256 left NaN\*\* at 4096³ \(([\d,]+)",
                     section)  # fmt: skip
    assert said is not None
    assert int(said[1]) == count // (128 * 256) and int(said[2]) == (4096 // 128) * (4096 // 256)
    assert int(said[3].replace(",", "")) == count
    assert "bar for the DSL GEMM (85% of cuBLAS) is **not met**" in section


def test_the_script_checks_as_the_section_says() -> None:
    script = (ROOT / "bench" / "cute_dsl_gemm.py").read_text()
    assert 'c.fill_(float("nan"))' in script and "c.fill_(7.0)" in script
    assert "fills `C` with 7 and launches again" in _section()
    # The playground's own checker poisons outputs with NaN, as the section says.
    assert "NaN-poisoned outputs" in (ROOT / "kernels" / "check.py").read_text()
    kernel = (ROOT / "bench" / "cute_dsl_gemm_kernel.py").read_text()
    assert "PRODUCER_REGS, CONSUMER_REGS = 40, 232" in kernel
    assert 250 <= len(kernel.splitlines()) <= 290  # "about 270 lines"
