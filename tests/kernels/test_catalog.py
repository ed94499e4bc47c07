import hashlib
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


def test_no_file_under_problems_is_a_byte_identical_copy():
    """One copy of each kernel: an exercise borrows another problem's file by name."""
    first: dict[bytes, Path] = {}
    copies = []
    for path in sorted(PROBLEMS_DIR.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        digest = hashlib.sha256(path.read_bytes()).digest()
        if digest in first:
            copies.append(f"{path.relative_to(PROBLEMS_DIR)} = {first[digest].name}")
        first.setdefault(digest, path.relative_to(PROBLEMS_DIR))
    assert not copies, f"declare these with [[solutions_from]] instead: {copies}"


def test_borrowed_solutions_are_the_lenders_files():
    catalog = load_catalog()
    borrowers = {slug: spec for slug, spec in catalog.items() if spec.solutions_from}
    assert {"gemm_coalesce", "transpose_smem"} <= set(borrowers)
    for slug, spec in borrowers.items():
        for entry in spec.solutions_from:
            lender = catalog[entry.problem]
            for kind in ("correct", "wrong"):
                for name in getattr(entry, kind):
                    path = spec.solution_path(kind, name)
                    assert path == lender.solution_path(kind, name), (slug, name)
                    assert path.parent == lender.folder / "solutions" / kind
                    assert not (spec.folder / "solutions" / kind / name).exists()


def _borrower(tmp_path: Path) -> Path:
    for slug in ("gemm_coalesce", "sgemm"):
        shutil.copytree(PROBLEMS_DIR / slug, tmp_path / slug)
    return tmp_path / "gemm_coalesce"


def test_borrowed_solutions_load_from_the_declared_folder(tmp_path: Path):
    spec = load_problem(_borrower(tmp_path))
    correct = [p for _, p in spec.solutions("correct")]
    assert [p.name for p in correct] == ["gemm_02_coalesced.cu"]
    assert correct[0] == (tmp_path / "sgemm/solutions/correct/gemm_02_coalesced.cu").resolve()
    wrong = {p.name for _, p in spec.solutions("wrong")}
    assert wrong == {"a_read_down_a_column.cu", "grid_left_as_naive.cu"}
    with pytest.raises(FileNotFoundError, match="no correct solution 'gemm_01_naive.cu'"):
        spec.solution_path("correct", "gemm_01_naive.cu")


def test_a_missing_borrowed_solution_names_the_file_and_field(tmp_path: Path):
    exercise = _borrower(tmp_path)
    (tmp_path / "sgemm/solutions/correct/gemm_02_coalesced.cu").unlink()
    with pytest.raises(ProblemLoadError) as err:
        load_problem(exercise)
    assert err.value.path == exercise / "problem.toml"
    assert err.value.field == "solutions_from[0].correct[0]"
    assert "sgemm/solutions/correct/gemm_02_coalesced.cu" in str(err.value)


@pytest.mark.parametrize(
    ("old", "new", "field", "message"),
    [
        ('correct = ["gemm_02', 'wrong = ["gemm_02', "wrong[0]", "no solution file"),
        ('problem = "sgemm"', 'problem = "gemm_coalesce"', "problem", "from itself"),
        ('"gemm_02_coalesced.cu"', '"../sgemm/x.cu"', "correct[0]", "must be a file name"),
        ('"gemm_02_coalesced.cu"', '"sgemm_tiled.numba_cuda.py"', "correct[0]", "not a solution"),
        ('correct = ["gemm_02_coalesced.cu"]', "", "", "names no solution file"),
    ],
)
def test_bad_solutions_from_entries_are_refused(
    tmp_path: Path, old: str, new: str, field: str, message: str
):
    exercise = _borrower(tmp_path)
    _edit(exercise, old, new)
    with pytest.raises(ProblemLoadError, match=message) as err:
        load_problem(exercise)
    assert err.value.field == f"solutions_from[0]{'.' if field else ''}{field}"


def test_a_borrowed_solution_with_a_local_copy_is_refused(tmp_path: Path):
    exercise = _borrower(tmp_path)
    name = "gemm_02_coalesced.cu"
    local = exercise / "solutions" / "correct"
    local.mkdir(parents=True, exist_ok=True)
    shutil.copy(tmp_path / "sgemm/solutions/correct" / name, local / name)
    with pytest.raises(ProblemLoadError, match="keep one copy") as err:
        load_problem(exercise)
    assert err.value.field == "solutions_from[0].correct[0]"
