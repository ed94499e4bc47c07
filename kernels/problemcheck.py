"""`kplay check-problem SLUG`: load one problem and try its generator and reference.

What a contributor runs on a new problem folder before any kernel: the loader's checks of
problem.toml and of the folder's files, then generate() and reference() on every test case
the simulators run (the small ones), each result checked against problem.toml by name,
shape and dtype (kernels.contract). The report lists what each case produced, the
tolerance each output is compared with, and the kernel files the folder holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kplay.kernels import contract, dtypes
from kplay.kernels.catalog import ProblemLoadError, load_problem, problem_dirs
from kplay.kernels.names import unknown
from kplay.kernels.problem import ProblemSpec


@dataclass
class Report:
    ok: bool
    lines: list[str] = field(default_factory=list)


def find_folder(target: str) -> Path:
    """The folder of `target`: a path to a problem folder, or a slug in the tree or under
    KPLAY_EXTRA_PROBLEMS."""
    path = Path(target)
    if "/" in target or (path / "problem.toml").is_file():
        return path
    folders = {p.name: p for p in problem_dirs()}
    if target not in folders:
        raise KeyError(unknown("problem", target, folders))
    return folders[target]


def _tolerance(spec: ProblemSpec, dtype: str) -> str:
    info = dtypes.get(dtype)
    if info.exact:
        return "compared exactly"
    tol = spec.tolerance[dtype]
    written = dtype in _written(spec)
    source = "written in problem.toml" if written else f"the {dtype} default"
    return f"atol {tol.atol:g}, rtol {tol.rtol:g} ({source})"


def _written(spec: ProblemSpec) -> set[str]:
    import tomllib

    with (spec.folder / "problem.toml").open("rb") as fh:
        return set(tomllib.load(fh).get("tolerance", {}))


def check_problem(target: str) -> Report:
    try:
        folder = find_folder(target)
        spec = load_problem(folder)
    except (ProblemLoadError, KeyError) as exc:
        return Report(False, [f"FAILED to load: {exc.args[0] if exc.args else exc}"])
    lines = [f"{spec.slug}: {spec.title} ({spec.folder})", "  loaded: problem.toml and files"]
    for arg in spec.outputs:
        lines.append(f"  output {arg.name} ({arg.dtype}): {_tolerance(spec, arg.dtype)}")
    ok = True
    for case in spec.tests:
        if not case.simulate:
            lines.append(f"  case {case.name!r}: skipped (simulate = false: too large here)")
            continue
        try:
            report = contract.try_case(spec, case)
        except contract.ProblemError as exc:
            ok = False
            lines.append(f"  case {case.name!r}: FAILED: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001 - the problem's own code raised
            ok = False
            lines.append(f"  case {case.name!r}: FAILED: {type(exc).__name__}: {exc}")
            continue
        lines.append(f"  case {case.name!r}: ok")
        lines.extend(f"    in  {text}" for text in report.inputs)
        lines.extend(f"    out {text}" for text in report.outputs)
    for kind in ("correct", "wrong", "cheating"):
        files = spec.solutions(kind)  # type: ignore[arg-type]
        names = ", ".join(f"{p.name} ({b})" for b, p in files) or "none"
        lines.append(f"  solutions/{kind}: {names}")
    if len(spec.solutions("wrong")) < 2:
        lines.append("  note: the catalog's test asks for at least two wrong solutions")
    if not (spec.hints and spec.tiers):
        lines.append("  note: the catalog's test asks for hints and tiers")
    lines.append("OK" if ok else "FAILED")
    return Report(ok, lines)
