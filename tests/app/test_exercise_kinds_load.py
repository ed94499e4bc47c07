"""The exercise kinds' cell options: read when the book loads, each mistake stopped with the
chapter's file, the line and the cell's id; the book's own cells of each kind."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kplay.app.book import Book, BookError
from kplay.app.services.exercisespec import (
    FixExercise,
    PredictExercise,
    ProfileExercise,
    without_explanation,
)
from kplay.app.services.profilequiz import load_profile
from kplay.kernels.catalog import load_catalog
from kplay.kernels.problem import ProblemSpec

REPO = Path(__file__).resolve().parents[2]
STORED = REPO / "book" / "p3" / "profiles" / "sgemm-warptile-h200"


@pytest.fixture(scope="module")
def catalog() -> dict[str, ProblemSpec]:
    return dict(load_catalog())


def _chapter(tmp_path: Path, cell: str, catalog: dict[str, ProblemSpec]) -> Book:
    part = tmp_path / "book" / "p1"
    part.mkdir(parents=True, exist_ok=True)
    (part / "part.toml").write_text('title = "Part one"\n')
    text = (
        f"---\ntitle: Exercises\nslug: exercises\n---\n\nSome prose.\n\n```kernel-cell\n{cell}```\n"
    )
    (part / "01-exercises.md").write_text(text)
    return Book(tmp_path / "book", catalog, results_dir=tmp_path / "none")


def _error(tmp_path: Path, cell: str, catalog: dict[str, ProblemSpec]) -> str:
    with pytest.raises(BookError) as caught:
        _chapter(tmp_path, cell, catalog).index()
    message = str(caught.value)
    # Every message names the chapter's file and the cell.
    assert "01-exercises.md:" in message and "'c1'" in message, message
    return message


FIX = "id: c1\nproblem: saxpy\nbackend: numba-cpu\nbackends: numba-cpu\n"
PREDICT = "id: c1\nproblem: cpu_triad\nbackend: numba-cpu\n"
PROFILE = "id: c1\nproblem: sgemm\nbackend: cuda\nkind: profile\n"


@pytest.mark.parametrize(
    ("cell", "words"),
    [
        (FIX + "kind: repair\n", "kind 'repair' is not one of fix, predict, profile"),
        (FIX + "starter: off_by_one.numba_cuda.py\n", "say which kind with 'kind: fix'"),
        (FIX + "kind: fix\ntask: find it\n", "a cell of kind 'fix' needs 'starter'"),
        (FIX + "kind: fix\nstarter: updates_y_in_place.numba_cpu.py\n", "needs 'task'"),
        (
            FIX + "kind: fix\nstarter: no_such.numba_cpu.py\ntask: t\n",
            "is not a wrong solution of problem 'saxpy' (solutions/wrong/ holds: alpha_on_y",
        ),
        (
            FIX + "kind: fix\nstarter: off_by_one.numba_cuda.py\ntask: t\n",
            "is a numba-cuda kernel; a fix cell offers that backend alone",
        ),
        (
            "id: c1\nproblem: saxpy\nbackend: numba-cpu\nkind: fix\n"
            "starter: updates_y_in_place.numba_cpu.py\ntask: t\n",
            "write 'backend: numba-cpu' and 'backends: numba-cpu'",
        ),
        (FIX + "kind: fix\nstarter: a\ntask: t\ntolerance: 5\n", "belongs to a cell of kind"),
        (PREDICT + "kind: predict\npredict: gbps\ntolerance: 5\n", "needs 'question'"),
        (
            PREDICT + "kind: predict\nquestion: q?\npredict: speed\ntolerance: 5\n",
            "predict 'speed' is not a quantity a run measures; use one of gbps",
        ),
        (PREDICT + "kind: predict\nquestion: q?\npredict: gbps\n", "needs 'tolerance'"),
        (
            PREDICT + "kind: predict\nquestion: q?\npredict: gbps\ntolerance: about 5\n",
            "tolerance 'about 5': write a number, or a number and %",
        ),
        (
            PREDICT + "kind: predict\nquestion: q?\npredict: verdict\ntolerance: 5\n",
            "a predicted verdict is right or wrong; leave 'tolerance' out",
        ),
        (PROFILE + "question-1: registers | q?\n", "a cell of kind 'profile' needs 'profile'"),
        (PROFILE + "profile: nowhere\nquestion-1: registers | q?\n", "there is no folder"),
    ],
)
def test_mistakes_stop_the_book_in_words(
    tmp_path: Path, catalog: dict[str, ProblemSpec], cell: str, words: str
) -> None:
    assert words in _error(tmp_path, cell, catalog)


def _with_profile(tmp_path: Path) -> str:
    shutil.copytree(STORED, tmp_path / "book" / "p1" / "stored")
    return PROFILE + "profile: stored\n"


@pytest.mark.parametrize(
    ("questions", "words"),
    [
        ("", "needs 'question-1'"),
        ("question-1: registers | a?\nquestion-3: registers | b?\n", "without gaps"),
        ("question-1: registers\n", "write '<metric> | <the question in words>'"),
        ("question-1: clocks | a?\n", "unknown metric 'clocks'"),
        ("question-1: sol:Tensor Throughput | a?\n", "has no sol row 'Tensor Throughput'"),
        ("question-1: stall:sleepy | a?\n", "has no stall reason 'sleepy'"),
        ("question-1: duration_ms | a?\n", "is not a whole number: say how close"),
        ("question-1: stall:top within 1 | a?\n", "one of several choices: no factor"),
        ("question-1: registers * 0 | a?\n", "a factor of 0"),
    ],
)
def test_profile_questions_are_checked_against_the_profile(
    tmp_path: Path, catalog: dict[str, ProblemSpec], questions: str, words: str
) -> None:
    assert words in _error(tmp_path, _with_profile(tmp_path) + questions, catalog)


def test_a_stored_profile_missing_a_page_is_refused(
    tmp_path: Path, catalog: dict[str, ProblemSpec]
) -> None:
    folder = tmp_path / "stored"
    shutil.copytree(STORED, folder)
    (folder / "raw.csv").unlink()
    with pytest.raises(ValueError, match="lacks raw.csv"):
        load_profile(folder, catalog)
    shutil.copy(STORED / "raw.csv", folder / "raw.csv")
    (folder / "details.csv").write_text("not,an,export\n1,2,3\n")
    with pytest.raises(ValueError, match="not an Nsight Compute export"):
        load_profile(folder, catalog)


def test_the_books_cells_of_each_kind(catalog: dict[str, ProblemSpec]) -> None:
    book = Book(REPO / "book", catalog)
    fix = book.cell("p2-smem-tiling-fix").exercise
    assert isinstance(fix, FixExercise) and fix.backend == "cuda"
    assert fix.starter_path.parent.name == "wrong"
    predict = book.cell("ch03-triad-predict").exercise
    assert isinstance(predict, PredictExercise)
    assert predict.quantity == "percent_of_roofline" and predict.tolerance is not None
    assert book.cell("ch03-triad-predict").chapter == "roofline"
    profile = book.cell("p3-read-profile-rung7").exercise
    assert isinstance(profile, ProfileExercise) and len(profile.questions) == 5
    assert profile.profile.stage.kernel == "sgemm" and profile.profile.device == "NVIDIA H200"
    # The profiled kernel's hottest line, with its code, as the panel shows it.
    assert "fmaf" in profile.profile.stage.lines[0].code
    assert book.cell("p2-naive-sgemm").exercise is None


def test_a_wrong_kernel_loses_its_explanation_but_keeps_its_launch_line() -> None:
    cu = "// WRONG: the loop stops short.\n// kplay: grid=(4,1) block=(32,1)\n\nint x;\n// kept\n"
    assert (
        without_explanation(cu, "cuda") == "// kplay: grid=(4,1) block=(32,1)\n\nint x;\n// kept\n"
    )
    py = "# WRONG: adds into out.\n# twice\nimport numba\n# kept\n"
    assert without_explanation(py, "numba-cpu") == "import numba\n# kept\n"
