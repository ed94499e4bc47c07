import shutil
from pathlib import Path

import pytest

from kplay.kernels.catalog import PROBLEMS_DIR, ProblemLoadError, load_catalog, load_problem

EXPECTED = {"vector_add", "saxpy", "sum", "transpose", "sgemm", "softmax"}


def test_catalog_has_the_first_problems_and_each_is_complete():
    catalog = load_catalog()
    assert EXPECTED <= set(catalog)
    for slug, spec in catalog.items():
        for backend in spec.backends:
            assert spec.starter(backend).strip(), f"{slug}: empty starter for {backend}"
        assert spec.solutions("correct"), f"{slug}: no correct solutions"
        assert len(spec.solutions("wrong")) >= 2, f"{slug}: fewer than two wrong solutions"
        assert spec.hints and spec.tiers, f"{slug}: hints and tiers are part of the data"
        sizes = [p for case in spec.tests for p in case.params.values()]
        assert 1 in sizes, f"{slug}: no case of size 1"
        assert any(isinstance(s, int) and s > 1 and s & (s - 1) for s in sizes), (
            f"{slug}: no non-power-of-two size"
        )


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    target = tmp_path / "vector_add"
    shutil.copytree(PROBLEMS_DIR / "vector_add", target)
    return target


def _edit(folder: Path, old: str, new: str) -> None:
    toml = folder / "problem.toml"
    text = toml.read_text()
    assert old in text, f"fixture expects {old!r} in problem.toml"
    toml.write_text(text.replace(old, new, 1))


def test_loader_names_file_and_field_of_a_bad_dtype(broken: Path):
    _edit(broken, 'dtype = "float32"', 'dtype = "float33"')
    with pytest.raises(ProblemLoadError) as err:
        load_problem(broken)
    assert err.value.path == broken / "problem.toml"
    assert err.value.field is not None and err.value.field.startswith("args[")
    assert "float33" in str(err.value)


def test_loader_rejects_unknown_names_in_formulas(broken: Path):
    toml = broken / "problem.toml"
    text = toml.read_text()
    lines = [ln for ln in text.splitlines() if ln.startswith("bytes")]
    assert lines
    toml.write_text(text.replace(lines[0], 'bytes = "12 * nn"'))
    with pytest.raises(ProblemLoadError, match="bytes.*unknown name"):
        load_problem(broken)


def test_loader_rejects_missing_reference_and_slug_mismatch(tmp_path: Path, broken: Path):
    (broken / "reference.py").unlink()
    with pytest.raises(ProblemLoadError, match="missing reference.py"):
        load_problem(broken)
    other = tmp_path / "renamed"
    shutil.copytree(PROBLEMS_DIR / "vector_add", other)
    with pytest.raises(ProblemLoadError, match="slug"):
        load_problem(other)


def test_loader_reports_invalid_toml(broken: Path):
    (broken / "problem.toml").write_text("title = \n")
    with pytest.raises(ProblemLoadError, match="not valid TOML"):
        load_problem(broken)


def test_an_exercise_can_share_the_reference_of_the_problem_it_restates(tmp_path: Path):
    exercise = tmp_path / "gemm_coalesce"
    shutil.copytree(PROBLEMS_DIR / "gemm_coalesce", exercise)
    with pytest.raises(ProblemLoadError) as err:
        load_problem(exercise)  # no sgemm beside it
    assert err.value.field == "reference_from" and "sgemm" in str(err.value)
    shutil.copytree(PROBLEMS_DIR / "sgemm", tmp_path / "sgemm")
    spec = load_problem(exercise)
    assert callable(spec.reference.generate) and spec.reference_from == "sgemm"
    shutil.copy(PROBLEMS_DIR / "sgemm" / "reference.py", exercise / "reference.py")
    with pytest.raises(ProblemLoadError, match="keep one of the two"):
        load_problem(exercise)
