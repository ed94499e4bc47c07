"""What both halves of bench/part1.py share: one engine evaluation of a solution file,
rounding of the figures, and the date and commit every results file records."""

from __future__ import annotations

import datetime as dt
from typing import Any


def _commit() -> str:
    from bench.benchlib import commit

    return commit()


def _today() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")


def _evaluate(
    problem: str, backend: str, file: str, cap_s: float, benchmark: str | None = None
) -> Any:
    from kplay.kernels.catalog import get_problem
    from kplay.kernels.evaluate import evaluate
    from kplay.kernels.models import RunJob

    source = get_problem(problem).solution_path("correct", file).read_text()
    job = RunJob(
        problem=problem, backend=backend, source=source, timing_cap_s=cap_s, benchmark=benchmark
    )
    return evaluate(job)


def _r(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)
