"""What the web side tells about problems and backends, without importing any GPU library."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kplay.kernels.problem import SUFFIXES, ProblemSpec

# Shown on tabs. The web process does not import kernels.backends: a backend module may
# pull in Numba or Triton, which must be configured before import in the worker instead.
BACKEND_TITLES = {
    "cuda": "CUDA C++",
    "numba-cuda": "Numba CUDA",
    "triton": "Triton",
    "numba-cpu": "Numba CPU",
    "cutlass": "CUTLASS C++ (CuTe)",
    "cute-dsl": "CuTe DSL (Python)",
}


def backend_title(key: str) -> str:
    return BACKEND_TITLES.get(key, key)


def editor_language(key: str) -> str:
    return "cpp" if SUFFIXES.get(key, "").endswith(".cu") else "python"


@dataclass(frozen=True)
class BackendOffer:
    key: str
    title: str
    language: str
    starter: str
    launch: dict[str, Any]


def offers(problem: ProblemSpec, backends: tuple[str, ...] | list[str]) -> list[BackendOffer]:
    out = []
    for key in backends:
        launch = problem.launch.get(key)
        out.append(
            BackendOffer(
                key=key,
                title=backend_title(key),
                language=editor_language(key),
                starter=problem.starter(key),
                launch=launch.model_dump(mode="json") if launch else {},
            )
        )
    return out


def public_problem(problem: ProblemSpec) -> dict[str, Any]:
    """The spec as the API shows it: data only, no server paths, with starters per backend."""
    data = problem.public_dict()
    data["starters"] = {key: problem.starter(key) for key in problem.backends}
    data["backend_titles"] = {key: backend_title(key) for key in problem.backends}
    return data


def problem_summaries(catalog: Mapping[str, ProblemSpec]) -> list[dict[str, Any]]:
    return [
        {
            "slug": p.slug,
            "title": p.title,
            "summary": p.summary,
            "backends": list(p.backends),
            "tags": list(p.tags),
            "exercise": p.exercise,
        }
        for p in sorted(catalog.values(), key=lambda p: p.slug)
    ]
