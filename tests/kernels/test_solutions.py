"""The harness is tested by the solutions: every correct one passes, every wrong one fails.

Runs on the paths a machine without a GPU has: Numba on the CPU, Numba's CUDA simulator
and Triton's interpreter; CUDA C++ solutions are compiled with their resource report.
"""

from __future__ import annotations

import pytest

from kplay.kernels.backends.base import Capability, get_backend
from kplay.kernels.catalog import load_catalog
from kplay.kernels.evaluate import evaluate
from kplay.kernels.models import RunJob, RunState

GPU_ONLY_MARK = "kplay-expect: wrong-on-gpu-only"


def _solutions(kind: str) -> list[tuple[str, str, str]]:
    out = []
    for slug, spec in load_catalog().items():
        for backend, path in spec.solutions(kind):  # type: ignore[arg-type]
            out.append((slug, backend, str(path)))
    return out


def _ids(items: list[tuple[str, str, str]]) -> list[str]:
    return [f"{s}-{b}-{p.rsplit('/', 1)[-1]}" for s, b, p in items]


def _job(slug: str, backend: str, path: str) -> RunJob:
    with open(path) as fh:
        source = fh.read()
    return RunJob(problem=slug, backend=backend, source=source, mode="check", seed=1234)


CORRECT = _solutions("correct")
WRONG = _solutions("wrong")


def test_borrowed_solutions_are_checked_as_the_borrowers_own() -> None:
    """A file named in [[solutions_from]] runs against the exercise that borrows it (and
    against its own problem), from its one copy."""
    borrowed = 0
    for slug, spec in load_catalog().items():
        for entry in spec.solutions_from:
            lender = load_catalog()[entry.problem].folder
            for kind, items in (("correct", CORRECT), ("wrong", WRONG)):
                for name in getattr(entry, kind):
                    path = str(lender / "solutions" / kind / name)
                    users = {s for s, _b, p in items if p == path}
                    assert users == {slug, entry.problem}, (slug, name, users)
                    borrowed += 1
    assert borrowed >= 6


@pytest.mark.parametrize("slug,backend,path", CORRECT, ids=_ids(CORRECT))
def test_correct_solution_passes(slug: str, backend: str, path: str) -> None:
    cap = get_backend(backend).capability()
    if cap is Capability.unavailable:  # CUTLASS C++ without its headers (nvidia-cutlass)
        pytest.skip(f"the {backend} backend cannot compile on this machine")
    result = evaluate(_job(slug, backend, path))
    if cap is Capability.compile_only:
        # Compiled, never checked: its own state, not `done`.
        assert result.state is RunState.compiled, f"{result.state}: {result.message}"
        assert "not checked" in (result.message or "")
        assert result.compile and result.compile.resources, "no resource report"
        assert result.timing and not result.timing.timed
        assert "not run" in (result.timing.untimed_reason or "")
    else:
        assert result.state is RunState.done, f"{result.state}: {result.message}"
        assert result.check and result.check.ok and result.check.cases


def _runs_here(backend: str) -> bool:
    return get_backend(backend).capability() is not Capability.compile_only


# CUDA C++ and CUTLASS C++ have no simulator: without a GPU they only compile, and a wrong
# solution cannot be told from a right one. Their cases of the wrongness check are GPU
# tests on every machine, so that `pytest -m gpu` on a GPU host runs them.
RUNS_ONLY_ON_A_GPU = {"cuda", "cutlass"}
WRONG_RUN = [
    pytest.param(*w, id=i, marks=pytest.mark.gpu if w[1] in RUNS_ONLY_ON_A_GPU else ())
    for w, i in zip(WRONG, _ids(WRONG), strict=True)
]
WRONG_COMPILE_ONLY = [w for w in WRONG if not _runs_here(w[1])]


@pytest.mark.parametrize(
    "slug,backend,path", WRONG_COMPILE_ONLY, ids=_ids(WRONG_COMPILE_ONLY) or None
)
def test_wrong_solution_without_a_gpu_is_only_compiled(slug: str, backend: str, path: str) -> None:
    """What is really checked on such a machine: it compiles, with a resource report, and is
    plainly marked as not run (never as correct or timed)."""
    result = evaluate(_job(slug, backend, path))
    assert result.state is RunState.compiled, f"{result.state}: {result.message}"
    assert result.compile and result.compile.ok and result.compile.resources
    assert result.check is None or not result.check.cases
    assert result.timing and not result.timing.timed


@pytest.mark.parametrize("slug,backend,path", WRONG_RUN)
def test_wrong_solution_fails(slug: str, backend: str, path: str) -> None:
    job = _job(slug, backend, path)
    cap = get_backend(backend).capability()
    if cap is Capability.unavailable:  # CUTLASS C++ without its headers (nvidia-cutlass)
        pytest.skip(f"the {backend} backend cannot compile on this machine")
    if GPU_ONLY_MARK in job.source:
        if cap is not Capability.run:
            pytest.skip("this wrong solution is a race that only real hardware exposes")
        # A race shows in some launches only: give it the chances a learner's Run gives
        # it, the benchmark case and the re-checks after hundreds of timed launches.
        job = job.model_copy(update={"mode": "full", "timing_cap_s": 0.2})
    result = evaluate(job)
    assert result.state in (RunState.wrong, RunState.runtime_error), (
        f"a wrong solution was accepted: {result.state} {result.message}"
    )
