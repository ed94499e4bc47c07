"""Reading a real Nsight Compute report (warptiled SGEMM, 4096^3, H200) from its CSV pages."""

from pathlib import Path

import pytest

from kplay.kernels.ncuprofile import ProfileFormatError, read_profile, stall_table

DATA = Path(__file__).parent / "data" / "ncu"
ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / "kernels/problems/sgemm/solutions/correct/gemm_07_warptile.cu"


def pages(name: str = "sgemm_warptile") -> tuple[str, str, str]:
    return tuple((DATA / f"{name}_{p}.csv").read_text() for p in ("details", "raw", "source"))


def test_launch_and_speed_of_light() -> None:
    prof = read_profile(*pages())
    assert prof.kernel == "sgemm"
    assert prof.grid == "(32, 64, 1)" and prof.block == "(128, 1, 1)"
    assert prof.duration_ms == pytest.approx(2.95)
    assert prof.sm_ghz == pytest.approx(1.98)
    assert prof.speed_of_light["Compute (SM) Throughput"] == pytest.approx(79.72)
    assert prof.speed_of_light["DRAM Throughput"] == pytest.approx(5.39)
    assert prof.registers_per_thread == 163


def test_memory_chart_numbers_in_bytes() -> None:
    mem = read_profile(*pages()).memory
    assert mem["dram_read_bytes"] == pytest.approx(698.317568e6)
    assert mem["dram_write_bytes"] == pytest.approx(67.32544e6)
    assert mem["l2_hit_rate_pct"] == pytest.approx(80.76, abs=0.01)


def test_occupancy_names_the_register_limit() -> None:
    occ = read_profile(*pages()).occupancy
    assert occ["Theoretical Occupancy"] == pytest.approx(18.75)
    assert occ["Block Limit Registers"] == 3 < occ["Block Limit Shared Mem"]


def test_stalls_ranked_with_words() -> None:
    stalls = read_profile(*pages()).stalls
    assert [s["reason"] for s in stalls[:2]] == ["not_selected", "selected"]
    assert all(s["words"] for s in stalls)
    ratios = [s["cycles_per_issue"] for s in stalls]
    assert ratios == sorted(ratios, reverse=True)


def test_learner_lines_ranked_by_samples() -> None:
    prof = read_profile(*pages())
    top = prof.lines[0]
    assert top.line == 289 and top.samples == 180490
    assert "fmaf" in KERNEL.read_text().splitlines()[top.line - 1]
    samples = [entry.samples for entry in prof.lines]
    assert samples == sorted(samples, reverse=True)
    table = stall_table(prof, KERNEL.read_text(), top=3)
    assert len(table) == 3 and "fmaf" in table[0]


def test_advice_sorted_by_estimated_speedup() -> None:
    advice = read_profile(*pages()).advice
    assert advice[0]["rule"] == "TheoreticalOccupancy"
    assert advice[0]["speedup_pct"] == pytest.approx(81.25)


def test_wrong_pages_are_refused_in_words() -> None:
    details, raw, source = pages()
    with pytest.raises(ProfileFormatError, match="Metric Name"):
        read_profile(raw, raw, source)
    with pytest.raises(ProfileFormatError, match="Line No"):
        read_profile(details, raw, details)
    with pytest.raises(ProfileFormatError, match="raw page"):
        read_profile(details, "a,b\n", source)


def test_profiler_selects_the_marked_benchmark_launch_only(tmp_path: Path) -> None:
    from kplay.kernels.ncurun import profile_argv
    from kplay.kernels.perf import BENCHMARK_RANGE

    argv = profile_argv("ncu", tmp_path / "r", ["python", "x.py"])
    assert argv[argv.index("--nvtx-include") + 1] == f"{BENCHMARK_RANGE}/"
    assert argv[argv.index("--launch-count") + 1] == "1"
    assert argv[argv.index("--clock-control") + 1] == "none"
    assert argv[-2:] == ["python", "x.py"]


def test_profile_without_ncu_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from kplay import cli
    from kplay.kernels import ncurun

    monkeypatch.setattr(ncurun, "find_ncu", lambda: None)
    code = cli.main(
        ["run", str(KERNEL), "--problem", "sgemm", "--profile", "--report", str(tmp_path / "r")]
    )
    assert code == 2
    assert "ncu" in capsys.readouterr().err


def test_lines_of_library_files_are_left_out() -> None:
    details, raw, source = pages()
    header = next(line for line in source.splitlines() if line.startswith('"Line No"'))
    width = header.count('","') + 1
    library = "\n".join(
        [
            '"File Path","/usr/lib/python3/site-packages/triton/language/standard.py"',
            '"Function Name","sgemm"',
            header,
            '"191",' + ",".join(['"999999"'] * (width - 1)),
        ]
    )
    prof = read_profile(details, raw, source + library + "\n")
    assert 191 not in [entry.line for entry in prof.lines]
    assert prof.lines[0].line == 289
    # With no file recognised as the learner's, every file's lines are kept.
    alone = read_profile(details, raw, library.replace("site-packages", "x") + "\n")
    assert [entry.line for entry in alone.lines] == [191]
