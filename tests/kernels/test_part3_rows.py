"""bench/part3_rows.py without a GPU: its rows name real solutions, its cases and bytes are
the problems' own, and its arithmetic and table say what they should."""

from __future__ import annotations

import pytest

from bench import part3_rows as bench
from kplay.kernels.catalog import load_catalog
from kplay.kernels.evaluate import evaluate
from kplay.kernels.models import RunJob
from kplay.kernels.problem import backend_for_path


def test_every_row_is_a_correct_solution_of_its_problem_for_its_backend() -> None:
    catalog = load_catalog()
    for name, problem, file, backend in bench.KERNEL_ROWS:
        spec = catalog[problem]
        path = spec.solution_path("correct", file)
        assert path.is_file(), name
        assert backend_for_path(path) == backend, name
        assert (backend, path) in spec.solutions("correct"), name
    names = [r[0] for r in bench.KERNEL_ROWS] + [n for n, _w in bench.TORCH_ROWS.values()]
    assert len(set(names)) == len(names)
    assert {r[1] for r in bench.KERNEL_ROWS} == set(bench.TORCH_ROWS)


def test_the_timed_cases_are_the_books_shapes_and_their_bytes_the_floor() -> None:
    assert bench.benchmark_case("softmax") == (
        "32768x4096",
        {"rows": 32768, "cols": 4096},
        8 * 32768 * 4096,
    )
    name, params, nbytes = bench.benchmark_case("layernorm")
    assert (name, params) == ("32768x4096", {"rows": 32768, "cols": 4096})
    assert nbytes == 8 * 32768 * 4096 + 8 * 4096  # x, out, gamma and beta once each
    name, params, nbytes = bench.benchmark_case("bias_gelu", "triton")
    assert nbytes == 8 * params["rows"] * params["cols"] + 4 * params["cols"]
    with pytest.raises(LookupError):
        bench.benchmark_case("softmax", "cutlass")


def test_floor_and_percent_arithmetic() -> None:
    # 1 GiB moved at 4262 GB/s (the H200's calibrated copy roof in bench/RESULTS.md).
    assert bench.floor_us(8 * 32768 * 4096, 4262e9) == pytest.approx(251.93, abs=0.01)
    assert bench.floor_us(1e9, None) is None
    assert bench.percent(1e9, 500.0, 4e12) == pytest.approx(50.0)
    assert bench.percent(1e9, None, 4e12) is None


def test_a_torch_row_and_the_table() -> None:
    row = bench.timed_row("torch", "32768x4096", 10**9, 500.0, 2.0, 2.5e12, 4e12)
    assert row["gbs"] == 2000.0
    assert row["percent_of_roofline"] == 50.0 and row["percent_of_copy"] == 80.0
    assert row["floor_us"] == 250.0
    failed = bench.timed_row("torch", "32768x4096", 10**9, None, None, 2.5e12, 4e12)
    assert failed["state"] == "failed" and "gbs" not in failed
    rows = {
        "copy": {"gbs": 4000},
        "torch_softmax": row,
        "softmax_one_read_cuda": {"state": "wrong", "backend": "cuda", "message": "a | b"},
    }
    lines = bench.markdown_table(rows).splitlines()
    assert len(lines) == 4 and lines[0].count("|") == len(bench.HEADERS) + 1
    cells = "torch_softmax | torch | 32768x4096 | done | 500.0 | 2.0 | 2000.0 | 50.0 | 80.0 | 250.0"
    assert lines[2] == f"| {cells} |"
    assert lines[3].startswith("| softmax_one_read_cuda | cuda | - | wrong | -")
    assert lines[3].endswith("a / b")


def test_an_untimed_engine_result_becomes_a_row_with_its_reason() -> None:
    """Here Triton runs in its interpreter: checked, never timed, so the row has no figures."""
    spec = load_catalog()["bias_gelu"]
    source = spec.solution_path("correct", "bias_gelu.triton.py").read_text()
    result = evaluate(RunJob(problem="bias_gelu", backend="triton", source=source, mode="check"))
    assert result.state.value == "done"
    row = bench.kernel_row(result, 2.5e12, 4e12)
    assert row["state"] == "done" and row["backend"] == "triton"
    assert "median_us" not in row and row["message"]
    assert bench.roof_of([result]) == (None, None)


def test_without_a_gpu_nothing_is_measured(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from kplay.kernels.hardware import has_cuda_gpu

    if has_cuda_gpu():
        pytest.skip("a GPU is here: the script would measure")
    out = tmp_path / "rows.json"
    assert bench.main(["--out", str(out)]) == 2
    assert not out.exists()
