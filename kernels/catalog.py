"""Loads and validates problem folders; every error names the file and the field."""

from __future__ import annotations

import importlib.util
import tomllib
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from types import ModuleType

from pydantic import ValidationError

from kplay.kernels import contract, dtypes, formula, sizing, torchref
from kplay.kernels.folder import check_layout, problem_folders
from kplay.kernels.names import unknown
from kplay.kernels.problem import (
    CHEAT_VERDICTS,
    Case,
    ProblemSpec,
    Tolerance,
    backend_for_path,
    declared_verdict,
)

PROBLEMS_DIR = Path(str(files("kplay.kernels"))) / "problems"


class ProblemLoadError(ValueError):
    def __init__(self, path: Path, field: str | None, message: str) -> None:
        self.path = path
        self.field = field
        where = f"{path}" + (f": field {field}" if field else "")
        super().__init__(f"{where}: {message}")


def _field_path(loc: tuple[object, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _load_toml(path: Path) -> dict:
    if not path.is_file():
        raise ProblemLoadError(path, None, "missing problem.toml")
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ProblemLoadError(path, None, f"not valid TOML: {exc}") from None


def _load_reference(path: Path, problem: ProblemSpec) -> ModuleType:
    if not path.is_file():
        raise ProblemLoadError(path, None, "missing reference.py")
    spec = importlib.util.spec_from_file_location(f"kernels_problem_ref_{problem.slug}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - any import failure is a broken folder
        raise ProblemLoadError(path, None, f"cannot import: {type(exc).__name__}: {exc}") from None
    try:
        torchref.adapt(module, problem)
    except torchref.TorchReferenceError as exc:
        raise ProblemLoadError(path, exc.field, str(exc)) from None
    for name in ("generate", "reference"):
        if not callable(getattr(module, name, None)):
            raise ProblemLoadError(path, name, f"reference.py must define a function {name}()")
    return module


def _check_formula(path: Path, field: str, text: str, known: set[str]) -> None:
    try:
        unknown = formula.names(text) - known
    except formula.FormulaError as exc:
        raise ProblemLoadError(path, field, str(exc)) from None
    if unknown:
        raise ProblemLoadError(
            path, field, f"formula {text!r} uses unknown name(s) {sorted(unknown)}"
        )


def _check_spec(spec: ProblemSpec, folder: Path) -> None:
    toml_path = folder / "problem.toml"
    if spec.slug != folder.name:
        raise ProblemLoadError(toml_path, "slug", f"{spec.slug!r} must equal the folder name")
    params = set(spec.params)
    names = [a.name for a in spec.args]
    if len(set(names)) != len(names):
        raise ProblemLoadError(toml_path, "args", "argument names must be unique")
    if not spec.outputs:
        raise ProblemLoadError(toml_path, "args", "at least one argument must be out or inout")
    for i, arg in enumerate(spec.args):
        if arg.role == "param" and arg.name not in params:
            raise ProblemLoadError(toml_path, f"args[{i}].name", f"{arg.name!r} is not a param")
        if arg.is_array and not arg.shape:
            raise ProblemLoadError(toml_path, f"args[{i}].shape", "arrays need a shape")
        for j, dim in enumerate(arg.shape):
            _check_formula(toml_path, f"args[{i}].shape[{j}]", dim, params)
    _check_formula(toml_path, "flops", spec.flops, params)
    _check_formula(toml_path, "bytes", spec.bytes, params)
    for kind in ("tests", "benchmarks"):
        cases = getattr(spec, kind)
        if not cases:
            raise ProblemLoadError(toml_path, kind, "at least one case is needed")
        for i, case in enumerate(cases):
            missing = params - set(case.params)
            if missing:
                raise ProblemLoadError(
                    toml_path, f"{kind}[{i}].params", f"missing parameter(s) {sorted(missing)}"
                )
    for i, case in enumerate(spec.benchmarks):
        _check_cpu_case(spec, case, toml_path, f"benchmarks[{i}]")
    _check_dtypes(spec, toml_path)
    for backend in spec.backends:
        launch = spec.launch.get(backend)
        if launch is None:
            raise ProblemLoadError(toml_path, f"launch.{backend}", "missing launch defaults")
        known = params | set(launch.constants)
        for key in ("grid", "block"):
            for j, text in enumerate(getattr(launch, key)):
                _check_formula(toml_path, f"launch.{backend}.{key}[{j}]", text, known)
        _check_formula(
            toml_path, f"launch.{backend}.shared_mem_bytes", launch.shared_mem_bytes, known
        )
        starters = [p for p in (folder / "starter").glob("*") if backend_for_path(p) == backend]
        if not starters:
            raise ProblemLoadError(folder / "starter", backend, "no starter file for backend")


def _check_dtypes(spec: ProblemSpec, toml_path: Path) -> None:
    """Scalars are plain NumPy numbers; every output's dtype has a tolerance (written, or
    the default of a low-precision float), and an exact type has none written. Afterwards
    `spec.tolerance` holds one for each output dtype, each knowing its dtype."""
    for i, arg in enumerate(spec.args):
        info = dtypes.get(arg.dtype)
        if not arg.is_array and (info.extension or info.kind == "packed"):
            raise ProblemLoadError(
                toml_path,
                f"args[{i}].dtype",
                f"a {arg.role} is passed as a plain number: bool, int8 ... uint64, "
                f"float16, float32 or float64, not {arg.dtype}",
            )
    for name, tol in spec.tolerance.items():
        if name not in dtypes.DTYPES:
            raise ProblemLoadError(toml_path, f"tolerance.{name}", f"unknown dtype {name!r}")
        if dtypes.get(name).exact:
            raise ProblemLoadError(
                toml_path,
                f"tolerance.{name}",
                f"{name} values are compared exactly; remove [tolerance.{name}]",
            )
        tol._dtype = name
    for arg in spec.outputs:
        if arg.dtype in spec.tolerance:
            continue
        info = dtypes.get(arg.dtype)
        if info.exact:
            spec.tolerance[arg.dtype] = Tolerance.of(arg.dtype)
        elif arg.dtype in dtypes.DEFAULT_TOLERANCES:
            atol, rtol = dtypes.DEFAULT_TOLERANCES[arg.dtype]
            spec.tolerance[arg.dtype] = Tolerance.of(arg.dtype, atol, rtol)
        else:
            raise ProblemLoadError(
                toml_path,
                "tolerance",
                f"no tolerance for the {arg.dtype} output {arg.name!r}: add "
                f"[tolerance.{arg.dtype}] with atol and rtol (float32 and float64 have no "
                "default: how far a result may drift depends on the algorithm)",
            )


def _check_cpu_case(spec: ProblemSpec, case: Case, toml_path: Path, field: str) -> None:
    """A CPU benchmark case grows with the host's last-level cache or names the cache level
    it measures (kernels.sizing); only a case for the CPU alone may grow."""
    cpu = sizing.is_cpu_case(spec, case)
    if case.scale is not None:
        if case.measures is not None:
            raise ProblemLoadError(
                toml_path,
                f"{field}.measures",
                "a case that grows to leave the caches "
                "measures DRAM; give it scale or measures, not both",
            )
        if not cpu or (case.backends or spec.backends) != [sizing.CPU_BACKEND]:
            raise ProblemLoadError(
                toml_path,
                f"{field}.scale",
                f"only a case meant for {sizing.CPU_BACKEND} "
                "alone may grow with the CPU's cache (set backends = ['numba-cpu'])",
            )
        for j, name in enumerate(case.scale.params):
            value = case.params.get(name)
            if name not in spec.params or not isinstance(value, int) or value < 1:
                raise ProblemLoadError(
                    toml_path,
                    f"{field}.scale.params[{j}]",
                    f"{name!r} is not a positive integer parameter of the case",
                )
        for name, most in case.scale.most.items():
            if name not in case.scale.params or most < int(case.params[name]):
                raise ProblemLoadError(
                    toml_path,
                    f"{field}.scale.most.{name}",
                    "names a param the case scales, at least as large as the case writes it",
                )
    elif cpu and case.measures is None:
        raise ProblemLoadError(
            toml_path,
            field,
            f"a {sizing.CPU_BACKEND} benchmark case either grows with the "
            f"host's last-level cache (scale = {{ params = [...] }}, to {sizing.LLC_MULTIPLE}x "
            "it, so that it measures DRAM) or says which cache level it measures (measures)",
        )


def _check_cheats(spec: ProblemSpec, folder: Path) -> None:
    """Every file under solutions/cheating/ runs on a backend of the problem and declares
    the verdict the harness must give it."""
    cheating = folder / "solutions" / "cheating"
    if not cheating.is_dir():
        return
    for path in sorted(cheating.iterdir()):
        if path.name == "__pycache__":
            continue
        backend = backend_for_path(path)
        if backend not in spec.backends:
            raise ProblemLoadError(
                path, None, f"not a solution file for backends {', '.join(spec.backends)}"
            )
        verdict = declared_verdict(path)
        if verdict not in CHEAT_VERDICTS:
            raise ProblemLoadError(
                path,
                "kplay-expect",
                f"a cheating kernel declares the verdict it must get, one of "
                f"{', '.join(CHEAT_VERDICTS)} (found {verdict!r})",
            )


def load_problem(folder: Path | str) -> ProblemSpec:
    folder = Path(folder)
    toml_path = folder / "problem.toml"
    data = _load_toml(toml_path)
    try:
        spec = ProblemSpec.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ProblemLoadError(toml_path, _field_path(first["loc"]), first["msg"]) from None
    _check_spec(spec, folder)
    check_layout(folder, spec.backends, ProblemLoadError)
    _check_cheats(spec, folder)
    spec.benchmarks = sizing.size_benchmarks(spec)
    spec._folder = folder.resolve()
    reference = _reference_path(spec, folder)
    spec._reference = _load_reference(reference, spec)
    try_first_case(spec, reference)
    spec._borrowed = _borrowed_solutions(spec, folder)
    return spec


def try_first_case(spec: ProblemSpec, reference: Path) -> contract.CaseReport:
    """Run generate() and reference() once, on the first test case, and check what they
    return against problem.toml (names, shapes, dtypes): a broken reference is found when
    the catalog loads, not blamed on the first learner who runs a kernel."""
    case = spec.tests[0]
    try:
        return contract.try_case(spec, case)
    except contract.ProblemError as exc:
        raise ProblemLoadError(reference, None, f"test case {case.name!r}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the problem's own code raised
        raise ProblemLoadError(
            reference, None, f"test case {case.name!r}: {type(exc).__name__}: {exc}"
        ) from None


def _reference_path(spec: ProblemSpec, folder: Path) -> Path:
    if spec.reference_from is None:
        return folder / "reference.py"
    shared = folder.parent / spec.reference_from / "reference.py"
    if (folder / "reference.py").exists():
        raise ProblemLoadError(
            folder / "problem.toml",
            "reference_from",
            "the folder has its own reference.py as well; keep one of the two",
        )
    if not shared.is_file():
        raise ProblemLoadError(
            folder / "problem.toml",
            "reference_from",
            f"no problem {spec.reference_from!r} with a reference.py beside this folder",
        )
    return shared


def _borrowed_solutions(spec: ProblemSpec, folder: Path) -> dict[str, list[Path]]:
    """Resolve `[[solutions_from]]`: each named file must exist, once, in the named folder."""
    toml_path = folder / "problem.toml"
    out: dict[str, list[Path]] = {"correct": [], "wrong": []}
    seen: set[str] = set()
    for i, entry in enumerate(spec.solutions_from):
        if entry.problem == spec.slug:
            raise ProblemLoadError(
                toml_path, f"solutions_from[{i}].problem", "a problem cannot borrow from itself"
            )
        if not (entry.correct or entry.wrong):
            raise ProblemLoadError(toml_path, f"solutions_from[{i}]", "names no solution file")
        for kind in ("correct", "wrong"):
            for j, name in enumerate(getattr(entry, kind)):
                field = f"solutions_from[{i}].{kind}[{j}]"
                if Path(name).name != name or name in (".", ".."):
                    raise ProblemLoadError(toml_path, field, f"{name!r} must be a file name")
                backend = backend_for_path(Path(name))
                if backend not in spec.backends:
                    raise ProblemLoadError(
                        toml_path,
                        field,
                        f"{name!r} is not a solution file for backends {spec.backends}",
                    )
                if name in seen or (folder / "solutions" / kind / name).exists():
                    raise ProblemLoadError(
                        toml_path, field, f"{name!r} is named twice; keep one copy of a kernel"
                    )
                seen.add(name)
                shared = folder.parent / entry.problem / "solutions" / kind / name
                if not shared.is_file():
                    raise ProblemLoadError(toml_path, field, f"no solution file {shared} to borrow")
                out[kind].append(shared.resolve())
    return out


def problem_dirs(root: Path | None = None) -> list[Path]:
    """Every problem folder of the catalog's roots (the tree's and KPLAY_EXTRA_PROBLEMS's).

    A subfolder without problem.toml is refused, naming it; an extra root that is missing
    is refused too, rather than leaving its problems out without a word.
    """
    roots = [root] if root else [PROBLEMS_DIR, *_extra_roots()]
    out: list[Path] = []
    for r in roots:
        if not r.is_dir():
            raise ProblemLoadError(r, None, "not a folder of problems (KPLAY_EXTRA_PROBLEMS)")
        out.extend(problem_folders(r, ProblemLoadError))
    return out


def _extra_roots() -> list[Path]:
    from kplay.config import EngineSettings

    return EngineSettings().extra_problem_dirs


@lru_cache(maxsize=1)
def load_catalog() -> dict[str, ProblemSpec]:
    catalog: dict[str, ProblemSpec] = {}
    for folder in problem_dirs():
        spec = load_problem(folder)
        if spec.slug in catalog:
            raise ProblemLoadError(folder, "slug", f"duplicate problem slug {spec.slug!r}")
        catalog[spec.slug] = spec
    return catalog


def get_problem(slug: str) -> ProblemSpec:
    catalog = load_catalog()
    if slug not in catalog:
        raise KeyError(unknown("problem", slug, catalog))
    return catalog[slug]
