"""Chapter IV.4's figures for the collective builder come from the builder benchmark: its stage
counts from the table in bench/RESULTS.md (what the compiled program printed), its speed from
the H100 run in bench/results, percentages recomputed from the recorded times."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
RUN = "cutlass_builder_h100_7799f8e.json"


def _builder_rows() -> dict[str, tuple[int, int]]:
    """(stages, epilogue bytes) per configuration of the RESULTS table."""
    text = (ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    section = text.split("collective builder and the CuTe DSL", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[1].isdigit():
            rows[cells[0]] = (int(cells[1]), int(cells[3].split()[0].replace(",", "")))
    return rows


def test_the_chapters_stage_counts_are_the_builders() -> None:
    rows = _builder_rows()
    coop = rows["cooperative 128x256x64, cluster 1x1 or 2x1, fp32 out"]
    pingpong = rows["ping-pong 128x128x64, fp32 out"]
    chapter = (ROOT / "book" / "p4" / "04-cutlass-cute.md").read_text(encoding="utf-8")
    said = re.search(
        r"\(beta = 0\) the same epilogue needs (\d+) KiB, and the builder takes (\d+) stages "
        r"again; the ping-pong\s+schedule with 128 x 128 tiles takes (\d+)",
        chapter,
    )
    assert said is not None
    kib, stages, pp_stages = (int(g) for g in said.groups())
    assert kib == round(coop[1] / 1024) and stages == coop[0] and pp_stages == pingpong[0]


def _runs() -> dict[int, dict[str, dict]]:
    """Rows by size and configuration, each percentage checked against the recorded times."""
    data = json.loads((RESULTS / RUN).read_text())
    assert data["device"] == "NVIDIA H100 80GB HBM3" and not data["runs"][0]["errors"]
    runs = {}
    for run in data["runs"]:
        rows = {r["config"]: r for r in run["rows"]}
        for row in rows.values():
            cublas = rows[f"cublas_gemmex_{row['out']}"]["median_us"]
            assert f"{100 * cublas / row['median_us']:.1f}" == f"{row['pct_of_cublas']:.1f}"
            assert row.get("ok", True) and row["max_err"] in (None, 0), row["config"]
        runs[run["size"]] = rows
    return runs


def _pct(row: dict, digits: int = 1) -> str:
    return f"{row['pct_of_cublas']:.{digits}f}%"


def test_the_chapters_builder_speeds_are_the_h100_run() -> None:
    runs = _runs()
    text = " ".join((ROOT / "book" / "p4" / "04-cutlass-cute.md").read_text().split())
    para = text.split("`bench/cutlass_builder.py` builds these kernels", 1)[1].split("**.", 1)[0]
    assert f"on an **H100** (`bench/results/{RUN}`" in para and "every output equal" in para
    f32 = {n: {k: r for k, r in rows.items() if k.endswith("_f32") and "cublas" not in k}
           for n, rows in runs.items()}  # fmt: skip
    best4 = max(f32[4096].values(), key=lambda r: r["pct_of_cublas"])
    best8 = max(f32[8192].values(), key=lambda r: r["pct_of_cublas"])
    assert best4["config"] == "cooperative_128x256x64_c1x1_f32"
    assert best8["config"] == "cooperative_128x256x64_c2x1_f32"
    said = f"kernel ran at {_pct(best4)} of cuBLAS at 4096³ with a 1 x 1 cluster and at "
    assert said + f"{_pct(best8)} at 8192³ with a 2 x 1 cluster" in para
    ladder = json.loads((RESULTS / "hopper_ladder_h100_h8_7799f8e.json").read_text())["rows"]
    slow, usual = runs[8192]["cublas_gemmex_f32"]["median_us"], ladder["cublas@8192"]["median_us"]
    assert slow > 1.1 * usual and f"took {slow:.1f} µs in that process, against {usual:.1f}" in para
    for n in (4096, 8192):
        assert (
            runs[n]["cublas_gemmex_bf16"]["median_us"] < runs[n]["cublas_gemmex_f32"]["median_us"]
        )
    bf16 = [max((r for k, r in runs[n].items() if k.endswith("_bf16") and "cublas" not in k),
                key=lambda r: r["pct_of_cublas"]) for n in (4096, 8192)]  # fmt: skip
    assert f"builder's best reached {_pct(bf16[0])} and {_pct(bf16[1])}" in para
    alone = [runs[n]["pingpong_128x128x64_c1x1_f32"] for n in (4096, 8192)]
    pair = [runs[n]["pingpong_128x128x64_c2x1_f32"] for n in (4096, 8192)]
    assert all(r is min(f32[n].values(), key=lambda r: r["pct_of_cublas"])
               for n, r in zip((4096, 8192), alone, strict=True))  # fmt: skip
    assert f"slowest schedule, {_pct(alone[0], 0)} and {_pct(alone[1], 0)} with fp32" in para
    assert f"lifted it most, to {_pct(pair[0])} and {_pct(pair[1])}" in para
    per_byte = [2 * 128 * n * 64 / ((128 + n) * 64 * 2) for n in (128, 256)]
    assert [round(x) for x in per_byte] == [64, 85] and "64 FLOPs per byte" in para
    assert "the 128 x 256 tile's 85" in para and "on the H200 is still **not measured" in para
    assert not list(RESULTS.glob("cutlass_builder_h200*")), "the H200 was measured: quote it"
