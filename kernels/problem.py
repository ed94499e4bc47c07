"""The problem schema (problem.toml) and its models.

A problem is a folder `kernels/problems/<slug>/` holding `problem.toml`,
`reference.py`, `starter/`, `solutions/correct/` and `solutions/wrong/`, and optionally
`solutions/cheating/`: kernels that try to fool the harness, each named for its trick and
declaring the verdict the harness must give it (see CHEAT_VERDICTS). An exercise that
restates another problem borrows that problem's reference (`reference_from`) and any of
its solution files (`[[solutions_from]]`) instead of carrying copies.
The loader in `kernels.catalog` validates folders against these models.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from kplay.kernels import dtypes as _dtypes

BACKEND_KEYS = ("cuda", "numba-cuda", "triton", "numba-cpu", "cutlass", "cute-dsl")
DTYPES = _dtypes.NAMES
CEILING_NAMES = ("fp32", "fp64", "fp16_tc", "bf16_tc", "tf32_tc", "fp8_tc")
SolutionKind = Literal["correct", "wrong", "cheating"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ArgSpec(_Strict):
    """One kernel argument, in the order the kernel receives it.

    role: `in` / `out` / `inout` are arrays; `scalar` is a value drawn by the
    reference generator (e.g. alpha); `param` is a case parameter passed as a scalar.
    """

    name: str
    dtype: str = "float32"
    shape: list[str] = Field(default_factory=list)
    role: Literal["in", "out", "inout", "scalar", "param"]
    init: Literal["nan", "zeros"] = "nan"
    description: str = ""

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, v: str) -> str:
        if v not in DTYPES:
            raise ValueError(f"unknown dtype {v!r}; use one of {', '.join(DTYPES)}")
        return v

    @property
    def is_array(self) -> bool:
        return self.role in ("in", "out", "inout")


class CaseScale(_Strict):
    """A CPU benchmark case that grows with the host (see kernels.sizing).

    The case's own params are the smallest it may be. The params named here grow together,
    each by the same factor and rounded up to a multiple of `multiple_of`, until the case's
    bytes (the problem's `bytes` formula) are at least LLC_MULTIPLE times the host's
    last-level cache, but not beyond the engine's cap (KPLAY_CPU_CASE_MAX_MB).
    """

    params: list[str] = Field(min_length=1)
    multiple_of: int = Field(default=1024, ge=1)
    # The most a scaled param may become, where the problem has a reason of its own (a
    # float32 running sum stops growing past 2^25 elements); reaching it stops the growth
    # like the engine's cap does.
    most: dict[str, int] = Field(default_factory=dict)


class CaseSizing(_Strict):
    """How a scaled case was sized on this host (kept beside the case, never in a TOML)."""

    llc_bytes: int  # the host's last-level cache, every instance together
    target_bytes: int  # LLC_MULTIPLE x llc_bytes
    cap_bytes: int  # the most a CPU case may hold (KPLAY_CPU_CASE_MAX_MB)
    bytes: int  # what the case holds at the sizes chosen
    capped: bool  # the cap (or a param's `most`) stopped it short of the target
    written: dict[str, int | float]  # the params as problem.toml gives them

    @property
    def llc_multiple(self) -> float:
        return self.bytes / self.llc_bytes


class Case(_Strict):
    name: str
    params: dict[str, int | float]
    seed: int = 0
    # Cases too large for Numba's CUDA simulator or Triton's interpreter say so; they
    # still run on real hardware.
    simulate: bool = True
    # A benchmark case may be meant for some backends only (a CPU needs smaller sizes).
    backends: list[str] | None = None
    # A CPU benchmark case either grows with the host's last-level cache, so that it
    # measures DRAM (`scale`), or says in words which cache level it lives in and measures
    # (`measures`, shown on the run's card), e.g. a compute-bound case kept in L2 on purpose.
    scale: CaseScale | None = None
    measures: str | None = Field(default=None, min_length=1)

    _sizing: CaseSizing | None = PrivateAttr(default=None)

    @property
    def sizing(self) -> CaseSizing | None:
        """How the loader sized a scaled case on this host; None for a case of fixed size."""
        return self._sizing


class Tolerance(_Strict):
    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)

    # The dtype the loader found this tolerance under (or made it for): tells the checker
    # to compare exactly (integers, bool) or to unpack a packed 4-bit type first.
    _dtype: str | None = PrivateAttr(default=None)

    @property
    def dtype(self) -> str | None:
        return self._dtype

    @classmethod
    def of(cls, dtype: str, atol: float = 0.0, rtol: float = 0.0) -> Tolerance:
        tol = cls(atol=atol, rtol=rtol)
        tol._dtype = dtype
        return tol


class LaunchDefault(_Strict):
    """Default launch of one backend. Formulas may use case params and constants."""

    kernel: str
    grid: list[str] = Field(default_factory=list)
    block: list[str] = Field(default_factory=list)
    shared_mem_bytes: str = "0"
    num_warps: int | None = None
    num_stages: int | None = None
    constants: dict[str, str] = Field(default_factory=dict)


class Baseline(_Strict):
    name: str
    description: str = ""


class Tier(_Strict):
    name: str
    percent_of_roofline: float | None = None
    percent_of_baseline: float | None = None
    description: str = ""


class SharedSolutions(_Strict):
    """Solution files of another problem's folder that this problem checks as its own.

    Names are file names under `<problem>/solutions/correct/` and `.../wrong/`; one copy of
    each kernel lives in the tree, in the folder of the problem it was written for.
    """

    problem: str
    correct: list[str] = Field(default_factory=list)
    wrong: list[str] = Field(default_factory=list)


class ProblemSpec(_Strict):
    slug: str
    title: str
    summary: str
    params: list[str]
    args: list[ArgSpec]
    backends: list[str]
    tests: list[Case]
    benchmarks: list[Case]
    tolerance: dict[str, Tolerance] = Field(default_factory=dict)
    flops: str
    bytes: str
    compute_ceiling: str = "fp32"
    launch: dict[str, LaunchDefault]
    baseline: Baseline | None = None
    hints: list[str] = Field(default_factory=list)
    tiers: list[Tier] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    exercise: bool = False
    # Every output element depends only on the inputs' elements at the same flat index
    # (and on scalars), and every array has one shape: the harness may then work out a
    # changed input set's outputs where it changed only (kernels.rotation).
    elementwise: bool = False
    # An exercise that states the same computation as another problem shares its
    # reference.py instead of carrying a copy: the slug of that problem.
    reference_from: str | None = None
    # Solution files it borrows from other problems' folders (resolved by the loader).
    solutions_from: list[SharedSolutions] = Field(default_factory=list)

    _folder: Path | None = PrivateAttr(default=None)
    _reference: ModuleType | None = PrivateAttr(default=None)
    _borrowed: dict[str, list[Path]] = PrivateAttr(default_factory=dict)

    @field_validator("backends")
    @classmethod
    def _backends(cls, v: list[str]) -> list[str]:
        unknown = [b for b in v if b not in BACKEND_KEYS]
        if unknown:
            raise ValueError(f"unknown backend(s) {unknown}; use {', '.join(BACKEND_KEYS)}")
        if not v:
            raise ValueError("a problem offers at least one backend")
        return v

    @field_validator("compute_ceiling")
    @classmethod
    def _ceiling(cls, v: str) -> str:
        if v not in CEILING_NAMES:
            raise ValueError(f"unknown ceiling {v!r}; use one of {', '.join(CEILING_NAMES)}")
        return v

    @model_validator(mode="after")
    def _elementwise_shapes(self) -> ProblemSpec:
        shapes = {tuple(a.shape) for a in self.args if a.is_array}
        if self.elementwise and len(shapes) > 1:
            raise ValueError("an elementwise problem's arrays all have one shape")
        return self

    # ---- accessors used by the engine

    @property
    def folder(self) -> Path:
        assert self._folder is not None
        return self._folder

    @property
    def reference(self) -> ModuleType:
        assert self._reference is not None
        return self._reference

    def arg(self, name: str) -> ArgSpec:
        for a in self.args:
            if a.name == name:
                return a
        raise KeyError(name)

    @property
    def outputs(self) -> list[ArgSpec]:
        return [a for a in self.args if a.role in ("out", "inout")]

    @property
    def inputs(self) -> list[ArgSpec]:
        return [a for a in self.args if a.role in ("in", "inout", "scalar")]

    def starter_path(self, backend: str) -> Path:
        return _one_file(self.folder / "starter", backend)

    def starter(self, backend: str) -> str:
        return self.starter_path(backend).read_text()

    def solutions(self, kind: SolutionKind) -> list[tuple[str, Path]]:
        """(backend, path) of each solution file, backend read from the file's suffix.

        The folder's own files and those borrowed through `solutions_from`, by file name.
        """
        folder = self.folder / "solutions" / kind
        own = sorted(folder.iterdir()) if folder.is_dir() else []
        paths = sorted([*own, *self._borrowed.get(kind, [])], key=lambda p: p.name)
        out: list[tuple[str, Path]] = []
        for path in paths:
            backend = backend_for_path(path)
            if backend is not None:
                out.append((backend, path))
        return out

    def solution_path(self, kind: SolutionKind, name: str) -> Path:
        """The path of one solution file by name, wherever its one copy lives."""
        for _backend, path in self.solutions(kind):
            if path.name == name:
                return path
        raise FileNotFoundError(f"problem {self.slug!r} has no {kind} solution {name!r}")

    def public_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


# What a cheating kernel must end as, declared in its file as `kplay-expect: <verdict>`:
# wrong (a check of its output catches it), suspicious (its time is impossible), or done
# (the harness leaves the trick nothing to exploit, so the kernel does its work honestly).
CHEAT_VERDICTS = ("wrong", "suspicious", "done")
_EXPECT = re.compile(r"kplay-expect:\s*([a-z_-]+)")


def declared_verdict(path: Path) -> str | None:
    """The verdict a cheating kernel's file declares, or None when it declares none."""
    match = _EXPECT.search(path.read_text(encoding="utf-8", errors="replace"))
    return match.group(1) if match else None


# File naming: <anything>.cu is CUDA C++, <anything>.cutlass.cu CUTLASS C++ (the longest
# suffix wins); Python files end in .numba_cuda.py, .triton.py or .numba_cpu.py so one
# folder can hold every language.
SUFFIXES = {
    "cuda": ".cu",
    "numba-cuda": ".numba_cuda.py",
    "triton": ".triton.py",
    "numba-cpu": ".numba_cpu.py",
    "cutlass": ".cutlass.cu",
    "cute-dsl": ".cute.py",
}


def backend_for_path(path: Path) -> str | None:
    found = [key for key, suffix in SUFFIXES.items() if path.name.endswith(suffix)]
    return max(found, key=lambda key: len(SUFFIXES[key]), default=None)


def _one_file(folder: Path, backend: str) -> Path:
    matches = [p for p in sorted(folder.glob("*")) if backend_for_path(p) == backend]
    if not matches:
        raise FileNotFoundError(f"{folder} has no starter for backend {backend!r}")
    return matches[0]
