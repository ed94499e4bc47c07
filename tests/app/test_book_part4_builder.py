"""Chapter IV.4's figures for the collective builder's stage counts come from the builder
benchmark's table in bench/RESULTS.md (what the compiled program printed)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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
