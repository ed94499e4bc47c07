"""bench/attention_fwd.py without a GPU: its arguments and the table it prints."""

from __future__ import annotations

import pytest

from bench import attention_fwd as bench


def test_triton_configs_are_parsed_and_checked() -> None:
    assert bench.parse_configs("") == []
    got = bench.parse_configs("64:3:8, 128:2:4")
    assert got == [bench.TritonConfig(64, 3, 8), bench.TritonConfig(128, 2, 4)]
    assert got[0].label == "BLOCK_N=64 stages=3 warps=8"
    for bad in ("64:3", "a:3:8", "96:3:8", "256:2:8"):
        with pytest.raises(ValueError, match="BLOCK_N"):
            bench.parse_configs(bad)


def test_tflops_from_flops_and_microseconds() -> None:
    assert bench.tflops(2e12, 1e6) == pytest.approx(2.0)
    assert bench.tflops(549.8e9, 1551.0) == pytest.approx(354.5, abs=0.1)
    assert bench.tflops(1e12, None) is None


def test_the_table_compares_each_case_with_its_own_flash_and_fastest_rows() -> None:
    flash = bench.FLASH_LABEL
    rows = [
        bench.Row("full", "mine.triton.py", 2000.0, 1e12),  # 500 TFLOP/s
        bench.Row("full", flash, 4000.0, 1e12),  # 250
        bench.Row("full", "SDPA cuDNN", 1000.0, 1e12),  # 1000
        bench.Row("causal", "mine.triton.py", 1000.0, 5e11),  # 500
        bench.Row("causal", flash, 500.0, 5e11),  # 1000
        bench.Row("causal", "broken.cu", None, 5e11, "wrong: o[0] differs"),
    ]
    lines = bench.table(rows).splitlines()
    assert lines[0].startswith("| case | kernel | median (ms) | TFLOP/s | % of SDPA flash")
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert cells[0] == ["full", "mine.triton.py", "2.000", "500", "200.0", "50.0", ""]
    assert cells[1][4:6] == ["100.0", "25.0"]
    assert cells[2][4:6] == ["400.0", "100.0"]
    assert cells[3] == ["causal", "mine.triton.py", "1.000", "500", "50.0", "50.0", ""]
    assert cells[5] == ["causal", "broken.cu", "-", "-", "-", "-", "wrong: o[0] differs"]


def test_a_table_without_a_flash_row_leaves_that_column_empty() -> None:
    line = bench.table([bench.Row("full", "a", 1000.0, 1e12)]).splitlines()[2]
    assert line == "| full | a | 1.000 | 1000 | - | 100.0 |  |"


def test_unknown_cases_are_refused() -> None:
    with pytest.raises(SystemExit):
        bench.main(["--cases", "full,sliding"])
    with pytest.raises(ValueError, match="BLOCK_N"):
        bench.main(["--triton-configs", "48:3:8"])


def test_the_benchmark_cases_are_the_two_sdpa_shapes() -> None:
    from kplay.kernels import formula
    from kplay.kernels.catalog import load_problem

    spec = load_problem(bench.FOLDER)
    shapes = [dict(c.params) for c in spec.benchmarks]
    base = {"batch": 4, "heads": 16, "seq": 4096, "dim": 128}
    assert shapes == [base | {"causal": False}, base | {"causal": True}]
    full, causal = (float(formula.evaluate(spec.flops, s)) for s in shapes)
    assert full == 4 * 4 * 16 * 4096 * 4096 * 128 and causal == full / 2
