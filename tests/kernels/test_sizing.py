"""CPU benchmark cases measure DRAM: sized from the last-level cache (kernels.sizing), or
saying which cache level they measure; and the CPU calibration measures the same level."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kplay.kernels import calibrate, hardware, roofline, sizing
from kplay.kernels.catalog import PROBLEMS_DIR, ProblemLoadError, load_problem, problem_dirs
from kplay.kernels.models import Ceilings
from kplay.kernels.problem import Case

MiB = 2**20
CAP = 512 * MiB


def _cpu_problems(monkeypatch: pytest.MonkeyPatch, llc: int) -> dict[str, object]:
    """Every problem folder loaded as on a host whose last-level cache holds `llc` bytes,
    under the product's default cap (the test suite lowers it; see tests/conftest.py)."""
    monkeypatch.setattr(sizing, "host_llc_bytes", lambda: llc)
    monkeypatch.setenv("KPLAY_CPU_CASE_MAX_MB", str(CAP // MiB))
    return {folder.name: load_problem(folder) for folder in problem_dirs(PROBLEMS_DIR)}


@pytest.mark.parametrize("llc_mib", [1, 8, 32])
def test_every_cpu_benchmark_case_is_4x_the_cache_or_names_its_level(
    monkeypatch: pytest.MonkeyPatch, llc_mib: int
) -> None:
    llc = llc_mib * MiB
    checked = 0
    for slug, spec in _cpu_problems(monkeypatch, llc).items():
        for case in spec.benchmarks:  # type: ignore[attr-defined]
            if not sizing.is_cpu_case(spec, case):  # type: ignore[arg-type]
                continue
            checked += 1
            nbytes = sizing.case_bytes(spec, case.params)  # type: ignore[arg-type]
            if case.measures is None:
                assert nbytes >= sizing.LLC_MULTIPLE * llc, (
                    f"{slug}: CPU case {case.name!r} holds {nbytes / MiB:.1f} MiB, less than "
                    f"{sizing.LLC_MULTIPLE}x a {llc_mib} MiB last-level cache, and names no "
                    "cache level it measures"
                )
                assert case.sizing is not None and not case.sizing.capped
            else:
                assert case.scale is None
    assert checked >= 10  # the four cpu_* problems and six with a CPU case


def test_a_big_cache_caps_the_cases_and_they_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    llc = 1024 * MiB  # 4x would be 4 GiB a case
    for slug, spec in _cpu_problems(monkeypatch, llc).items():
        for case in spec.benchmarks:  # type: ignore[attr-defined]
            if case.scale is None:
                continue
            sizing_ = case.sizing
            assert sizing_ is not None and sizing_.capped, slug
            assert sizing_.llc_multiple < sizing.LLC_MULTIPLE
            assert sizing_.bytes <= CAP, slug
            # The cap is reached, unless the problem's own limit (`most`) stopped it first.
            grown = {n: case.params[n] for n in case.scale.params}
            at_most = all(grown[n] == case.scale.most.get(n) for n in grown)
            assert at_most or sizing_.bytes > CAP * 0.99, (slug, sizing_.bytes / MiB)


def _vector_add_copy(tmp_path: Path) -> tuple[Path, Path, str]:
    """A copy of vector_add's folder to edit: (folder, its problem.toml, the toml's text)."""
    folder = tmp_path / "vector_add"
    shutil.copytree(PROBLEMS_DIR / "vector_add", folder)
    toml = folder / "problem.toml"
    return folder, toml, toml.read_text()


def test_a_cpu_case_of_fixed_size_must_name_its_level(tmp_path: Path) -> None:
    folder, toml, text = _vector_add_copy(tmp_path)
    line = 'scale = { params = ["n"], multiple_of = 4096 }\n'
    assert line in text
    toml.write_text(text.replace(line, ""))
    with pytest.raises(ProblemLoadError, match="grows with the host's last-level cache") as err:
        load_problem(folder)
    assert err.value.field == "benchmarks[2]"
    toml.write_text(text.replace(line, 'measures = "the last-level cache"\n'))
    case = load_problem(folder).benchmarks[2]
    assert case.params == {"n": 4194304} and case.measures == "the last-level cache"


def test_only_a_case_for_the_cpu_alone_may_grow(tmp_path: Path) -> None:
    folder, toml, text = _vector_add_copy(tmp_path)
    old = 'backends = ["numba-cpu"]\nscale'
    assert old in text
    toml.write_text(text.replace(old, 'backends = ["numba-cpu", "cuda"]\nscale'))
    with pytest.raises(ProblemLoadError, match="alone may grow"):
        load_problem(folder)
    toml.write_text(text.replace('params = ["n"], multiple_of', 'params = ["m"], multiple_of'))
    with pytest.raises(ProblemLoadError, match="'m' is not a positive integer parameter"):
        load_problem(folder)
    toml.write_text(
        text.replace("multiple_of = 4096 }", "multiple_of = 4096, most = { n = 1024 } }")
    )
    with pytest.raises(ProblemLoadError, match="at least as large as the case writes it"):
        load_problem(folder)


# ---------------------------------------------------------------- sizing itself


@pytest.fixture(scope="module")
def square():  # type: ignore[no-untyped-def]
    """transpose: bytes = 8 * rows * cols, its CPU case grows both sides together."""
    return load_problem(PROBLEMS_DIR / "transpose")


def _case(**scale: object) -> Case:
    return Case.model_validate(
        {
            "name": "c",
            "params": {"rows": 256, "cols": 256},
            "backends": ["numba-cpu"],
            "scale": {"params": ["rows", "cols"], **scale},
        }
    )


def test_the_smallest_growth_that_reaches_4x(square) -> None:  # type: ignore[no-untyped-def]
    sized = sizing.size_case(square, _case(multiple_of=64), 32 * MiB, CAP)
    assert sized.params == {"rows": 4096, "cols": 4096}  # 8 * 4096^2 = 128 MiB = 4 x 32 MiB
    assert sized.sizing is not None and sized.sizing.bytes == 128 * MiB
    assert sized.sizing.written == {"rows": 256, "cols": 256}
    assert not sized.sizing.capped
    # 3 MiB: 12 MiB wanted; sqrt(12 MiB / 8) = 1254.4, up to the next multiple of 64.
    small = sizing.size_case(square, _case(multiple_of=64), 3 * MiB, CAP)
    assert small.params == {"rows": 1280, "cols": 1280}
    assert 8 * 1216 * 1216 < 12 * MiB <= 8 * 1280 * 1280


def test_the_written_params_are_the_floor(square) -> None:  # type: ignore[no-untyped-def]
    sized = sizing.size_case(square, _case(), 16 * 2**10, CAP)  # 64 KiB wanted, 512 KiB written
    assert sized.params == {"rows": 256, "cols": 256}
    assert sized.sizing is not None and sized.sizing.llc_multiple == 32.0


def test_the_cap_and_a_params_most_stop_the_growth(square) -> None:  # type: ignore[no-untyped-def]
    capped = sizing.size_case(square, _case(multiple_of=64), 256 * MiB, 64 * MiB)
    rows = capped.params["rows"]
    assert capped.params["cols"] == rows and rows % 64 == 0
    assert 8 * rows * rows <= 64 * MiB < 8 * (rows + 64) ** 2
    assert capped.sizing is not None and capped.sizing.capped
    held = sizing.size_case(square, _case(most={"rows": 1024, "cols": 2048}), 256 * MiB, CAP)
    assert held.params == {"rows": 1024, "cols": 2048}
    assert held.sizing is not None and held.sizing.capped and held.sizing.bytes == 16 * MiB


def test_a_case_of_fixed_size_is_left_alone(square) -> None:  # type: ignore[no-untyped-def]
    case = Case(name="fixed", params={"rows": 64, "cols": 64}, measures="the L1 cache")
    assert sizing.size_case(square, case, 32 * MiB, CAP) is case


# ---------------------------------------------------------------- calibration and card


def test_calibration_arrays_are_4x_the_cache_each() -> None:
    assert calibrate.cpu_array_elements(1 << 24, 32 * MiB, CAP) == (1 << 24, False)
    n, capped = calibrate.cpu_array_elements(1 << 24, 96 * MiB, CAP)
    assert (n, capped) == (48 * MiB, False) and 8 * n == 4 * 96 * MiB
    n, capped = calibrate.cpu_array_elements(1 << 24, 1024 * MiB, CAP)
    assert 8 * n == CAP and capped
    assert calibrate.cpu_memory_level(128 * MiB, 32 * MiB) == "DRAM"
    assert calibrate.cpu_memory_level(CAP, 1024 * MiB).startswith("DRAM, partly the last-level")


def _cpu_ceilings(**fields: object) -> Ceilings:
    return Ceilings(
        device="Test CPU",
        kind="cpu",
        source="calibrated",
        copy_bytes_per_s=40e9,
        read_bytes_per_s=40e9,
        fp32_flops_per_s=100e9,
        **fields,  # type: ignore[arg-type]
    )


def test_cached_ceilings_over_small_arrays_are_measured_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KPLAY_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("KPLAY_CPU_CASE_MAX_MB", str(CAP // MiB))  # the product's default
    monkeypatch.setattr(
        hardware,
        "cpu",
        lambda: hardware.CpuFacts(model="Test CPU", architecture="x", logical_cores=1),
    )
    monkeypatch.setattr(sizing, "host_llc_bytes", lambda: 64 * MiB)
    fresh = _cpu_ceilings(memory_level="DRAM", memory_buffer_bytes=256 * MiB, llc_bytes=64 * MiB)
    calls: list[int] = []

    def measure(n: int, cap_s: float) -> Ceilings:
        calls.append(n)
        return fresh

    monkeypatch.setattr(calibrate, "calibrate_cpu", measure)
    # An older calibration, which did not say how large its arrays were: measured again.
    roofline.save_ceilings(_cpu_ceilings())
    assert calibrate.cpu_ceilings() == fresh and len(calls) == 1
    # Arrays of 128 MiB, measured when the cache (or the code) asked for less: again.
    roofline.save_ceilings(_cpu_ceilings(memory_buffer_bytes=128 * MiB))
    assert calibrate.cpu_ceilings() == fresh and len(calls) == 2
    # 4x a 64 MiB cache: kept.
    assert calibrate.cpu_ceilings() == fresh and len(calls) == 2


def test_the_roofline_carries_the_memory_level_and_the_cache() -> None:
    ceilings = _cpu_ceilings(memory_level="DRAM", memory_buffer_bytes=128 * MiB, llc_bytes=32 * MiB)
    place = roofline.place(1e6, 128 * MiB, 5000.0, ceilings)
    assert place is not None
    assert place.memory_level == "DRAM" and place.llc_bytes == 32 * MiB
    assert place.llc_multiple == 4.0
    gpu = roofline.datasheet("NVIDIA H200")
    assert gpu is not None
    on_gpu = roofline.place(1e6, 128 * MiB, 50.0, gpu)
    assert on_gpu is not None and on_gpu.memory_level == "DRAM" and on_gpu.llc_bytes is None
