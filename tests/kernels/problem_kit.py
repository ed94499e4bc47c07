"""Small problem folders written on the fly, for tests of the loader and the checker.

`write_problem(root, slug, args, reference)` makes a one-backend (numba-cpu) folder with
a starter, the given [[args]] (TOML text), one test case of size n and a reference.py.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from kplay.kernels.arrays import ArrayOps
from kplay.kernels.backends.base import ArrayKind
from kplay.kernels.check import run_case
from kplay.kernels.problem import ProblemSpec

HEAD = """\
slug = "{slug}"
title = "A test problem"
summary = "Written by a test."
params = ["n"]
backends = ["numba-cpu"]
flops = "n"
bytes = "n"
hints = ["one"]

[[tests]]
name = "small"
params = {{ n = {n} }}
seed = 3

[[benchmarks]]
name = "small"
params = {{ n = {n} }}
measures = "the L1 cache, on purpose: a test problem"

[launch."numba-cpu"]
kernel = "kernel"

[[tiers]]
name = "bronze"
percent_of_roofline = 10
"""

STARTER = """\
import numba


@numba.njit
def kernel(*args):
    pass
"""

# The default reference: out is a copy of x in every test problem that declares both.
COPY_REFERENCE = """\
from kplay.kernels.draws import array_module


def generate(params, draw):
    return {"x": draw.uniform(int(params["n"]), -4.0, 4.0)}


def reference(inputs, params):
    return {"out": inputs["x"].astype(array_module(inputs["x"]).float64)}
"""

FLOAT_ARGS = """\
[[args]]
name = "x"
dtype = "float32"
shape = ["n"]
role = "in"

[[args]]
name = "out"
dtype = "float32"
shape = ["n"]
role = "out"

[[args]]
name = "n"
dtype = "int32"
role = "param"
"""

FLOAT_TOL = """\
[tolerance.float32]
atol = 1e-6
rtol = 1e-6
"""


def write_problem(
    root: Path,
    slug: str,
    args: str = FLOAT_ARGS,
    reference: str = COPY_REFERENCE,
    extra: str = FLOAT_TOL,
    n: int = 37,
) -> Path:
    folder = root / slug
    (folder / "starter").mkdir(parents=True)
    (folder / "starter" / "kernel.numba_cpu.py").write_text(STARTER)
    toml = HEAD.format(slug=slug, n=n) + "\n" + args + "\n" + extra
    (folder / "problem.toml").write_text(toml)
    (folder / "reference.py").write_text(textwrap.dedent(reference))
    return folder


def check_with(problem: ProblemSpec, kernel, seed: int = 1):  # type: ignore[no-untyped-def]
    """run_case on the host with a Python function as the kernel: (CaseCheck, launches)."""
    launches = []

    def launch(args: list) -> None:
        launches.append(1)
        kernel(*args)

    ops = ArrayOps(ArrayKind.numpy)
    check, _ = run_case(problem, problem.tests[0], ops, launch, seed, memoise=False)
    return check, len(launches)
