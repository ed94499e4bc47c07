"""A problem folder checked as a whole: its files, its tolerances, what its generator and
reference return, a PyTorch reference, and `kplay check-problem`."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from kplay.cli import main
from kplay.kernels import catalog
from kplay.kernels.catalog import PROBLEMS_DIR, ProblemLoadError, load_problem
from kplay.kernels.check import InputError, expected_outputs
from kplay.kernels.contract import ProblemError
from tests.kernels.problem_kit import COPY_REFERENCE, FLOAT_ARGS, write_problem


@pytest.fixture
def vector_add(tmp_path: Path) -> Path:
    shutil.copytree(PROBLEMS_DIR / "vector_add", tmp_path / "vector_add")
    return tmp_path / "vector_add"


# ------------------------------------------------------------------ files


@pytest.mark.parametrize(
    "relative",
    [
        "solutions/correct/vector_add.numba.py",  # no backend reads this suffix
        "solutions/wrong/notes.txt",
        "solutions/maybe/vector_add.cu",  # not correct, wrong or cheating
        "starter/vector_add.py",
        "problem.tml",
        "notes.md",
    ],
)
def test_an_unknown_file_is_refused_by_name(vector_add: Path, relative: str):
    path = vector_add / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# a file\n")
    with pytest.raises(ProblemLoadError) as err:
        load_problem(vector_add)
    refused = path.parent if "maybe" in relative else path  # the unknown folder itself
    assert err.value.path == refused and str(refused) in str(err.value)


def test_a_misnamed_toml_suggests_the_name(vector_add: Path):
    (vector_add / "problem.tml").write_text("x = 1\n")
    with pytest.raises(ProblemLoadError, match="did you mean problem.toml"):
        load_problem(vector_add)


def test_a_kernel_for_a_backend_the_problem_lacks_is_refused(tmp_path: Path):
    folder = write_problem(tmp_path, "one_backend")
    (folder / "solutions" / "correct").mkdir(parents=True)
    (folder / "solutions" / "correct" / "copy.triton.py").write_text("# triton\n")
    with pytest.raises(ProblemLoadError, match="a triton kernel, and the problem offers numba-cpu"):
        load_problem(folder)


def test_a_folder_of_problems_refuses_a_subfolder_without_problem_toml(tmp_path: Path):
    write_problem(tmp_path, "fine")
    misnamed = write_problem(tmp_path, "misnamed")
    (misnamed / "problem.toml").rename(misnamed / "Problem.toml")
    with pytest.raises(ProblemLoadError, match=r"missing problem.toml \(found Problem.toml"):
        catalog.problem_dirs(tmp_path)
    (misnamed / "Problem.toml").rename(misnamed / "problem.toml")
    assert [p.name for p in catalog.problem_dirs(tmp_path)] == ["fine", "misnamed"]
    # An extra root may also be one problem's own folder.
    assert catalog.problem_dirs(misnamed) == [misnamed]
    with pytest.raises(ProblemLoadError, match="not a folder of problems"):
        catalog.problem_dirs(tmp_path / "nowhere")


# ------------------------------------------------------------------ tolerances and types

F16_IN = FLOAT_ARGS.replace('name = "x"\ndtype = "float32"', 'name = "x"\ndtype = "float16"')
F16_REFERENCE = COPY_REFERENCE.replace("-4.0, 4.0)", '-4.0, 4.0, "float16")')


def test_a_tolerance_is_asked_for_outputs_only(tmp_path: Path):
    spec = load_problem(write_problem(tmp_path, "half_in", F16_IN, F16_REFERENCE))
    assert set(spec.tolerance) == {"float32"}  # no float16 tolerance needed for an input
    folder = write_problem(tmp_path, "no_tol", extra="")
    with pytest.raises(ProblemLoadError, match="no tolerance for the float32 output 'out'"):
        load_problem(folder)


def test_a_scalar_cannot_be_a_bfloat16(tmp_path: Path):
    args = FLOAT_ARGS + '\n[[args]]\nname = "alpha"\ndtype = "bfloat16"\nrole = "scalar"\n'
    with pytest.raises(ProblemLoadError, match="passed as a plain number") as err:
        load_problem(write_problem(tmp_path, "bad_scalar", args))
    assert err.value.field == "args[3].dtype"


# ------------------------------------------------------------------ the reference's returns


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('return {"result": inputs["x"]}', "did not return 'out'"),
        ('return {"out": inputs["x"], "extra": inputs["x"]}', "'extra', which problem.toml"),
        ('return {"out": inputs["x"][:-1]}', "shape (36,)"),
        ('return {"out": inputs["x"].astype("int32")}', "as int32, and it must be a float"),
        ('return [inputs["x"]]', "returned list, not a dict"),
    ],
)
def test_a_broken_reference_is_the_problems_fault(tmp_path: Path, body: str, message: str):
    reference = COPY_REFERENCE.replace(
        'return {"out": inputs["x"].astype(array_module(inputs["x"]).float64)}', body
    )
    folder = write_problem(tmp_path, "bad_ref", reference=reference)
    with pytest.raises(ProblemLoadError) as err:
        load_problem(folder)
    assert err.value.path == folder / "reference.py"
    assert message in str(err.value)


def test_at_check_time_a_broken_reference_is_a_problem_error(tmp_path: Path):
    spec = load_problem(write_problem(tmp_path, "late_break"))
    spec.reference.reference = lambda inputs, params: {"out": np.zeros(3)}
    with pytest.raises(InputError, match="late_break: reference\\(\\) returned 'out' with shape"):
        expected_outputs(spec, {"n": 37}, 1, {"x": np.zeros(37, np.float32)}, memoise=False)
    assert InputError is ProblemError  # evaluate reports it as "problem error: ..."


def test_an_integer_output_returned_as_floats_is_refused(tmp_path: Path):
    args = FLOAT_ARGS.replace('name = "out"\ndtype = "float32"', 'name = "out"\ndtype = "uint8"')
    folder = write_problem(tmp_path, "grey", args, extra="")
    with pytest.raises(
        ProblemLoadError, match="as float64, and it must be uint8; uint8 is compared"
    ):
        load_problem(folder)


# ------------------------------------------------------------------ a PyTorch reference

TORCH_MODEL = """\
import torch

from kplay.kernels.draws import Draws


def generate(params, draw):
    return {"x": draw.uniform(int(params["n"]), -4.0, 4.0)}


class Model(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, x):
        assert x.dtype == torch.float64 and x.shape == (self.n,)
        return torch.tanh(x) * 2
"""


def test_a_torch_module_is_a_reference(tmp_path: Path):
    spec = load_problem(write_problem(tmp_path, "tanh2", reference=TORCH_MODEL))
    x = np.linspace(-3, 3, 37).astype(np.float32)
    out = spec.reference.reference({"x": x}, {"n": 37})
    assert np.allclose(out["out"], np.tanh(x.astype(np.float64)) * 2, rtol=1e-12)


def test_a_torch_function_is_a_reference_and_a_module_with_weights_is_refused(tmp_path: Path):
    function = TORCH_MODEL.split("class Model")[0] + (
        "from kplay.kernels.torchref import torch_reference\n\n\n"
        "@torch_reference\ndef reference(x, n):\n    return {'out': x[:n] * 3}\n"
    )
    spec = load_problem(write_problem(tmp_path, "times3", reference=function))
    out = spec.reference.reference({"x": np.ones(37, np.float32)}, {"n": 37})
    assert out["out"].dtype == np.float64 and (out["out"] == 3).all()
    weighted = TORCH_MODEL.replace(
        "self.n = n", "self.n = n\n        self.lin = torch.nn.Linear(1, 1)"
    )
    with pytest.raises(ProblemLoadError, match="holds parameters or buffers"):
        load_problem(write_problem(tmp_path, "weighted", reference=weighted))


# ------------------------------------------------------------------ kplay check-problem


def test_check_problem_reports_a_sound_problem(capsys: pytest.CaptureFixture[str]):
    assert main(["check-problem", "byte_histogram"]) == 0
    out = capsys.readouterr().out
    assert "output counts (uint32): compared exactly" in out
    assert "out counts: (256,) uint32" in out and out.rstrip().endswith("OK")


def test_check_problem_names_the_fault(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    reference = COPY_REFERENCE.replace('.astype(array_module(inputs["x"]).float64)', "[:3]")
    folder = write_problem(tmp_path, "short_ref", reference=reference)
    assert main(["check-problem", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "reference()" in out and "shape (3,)" in out


def test_check_problem_finds_extra_problems_by_slug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    write_problem(tmp_path, "outside_tree")
    monkeypatch.setenv("KPLAY_EXTRA_PROBLEMS", str(tmp_path))
    assert main(["check-problem", "outside_tree"]) == 0
    assert "atol 1e-06, rtol 1e-06 (written in problem.toml)" in capsys.readouterr().out
    assert main(["check-problem", "outside_tre"]) == 1
    assert "outside_tree" in capsys.readouterr().out  # did you mean
