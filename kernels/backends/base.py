"""The backend protocol: one small class per language, registered by key.

A backend compiles a learner's source into something launchable and launches it on
arrays that the harness made. Checking, timing and the roofline live elsewhere
(kernels.check, kernels.timing, kernels.roofline) and are the same for every backend.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar

from kplay.kernels.artifact import Artifact, Variant
from kplay.kernels.models import CompileStage
from kplay.kernels.names import unknown


class Capability(StrEnum):
    run = "run"  # compiled and launched on real hardware, timed
    simulate = "simulate"  # runs for correctness only (Numba's simulator, Triton's interpreter)
    compile_only = "compile-only"  # compiled, resources reported, never run
    unavailable = "unavailable"


class ArrayKind(StrEnum):
    numpy = "numpy"  # host memory
    cupy = "cupy"  # device memory owned by CuPy (also handed to Numba CUDA, zero copy)
    torch_cuda = "torch-cuda"  # device memory seen as torch tensors (Triton on a GPU)
    torch_cpu = "torch-cpu"  # host torch tensors (Triton's interpreter)


@dataclass
class LaunchSpec:
    """A concrete launch for one case: every formula already evaluated."""

    kernel: str
    grid: tuple[int, ...] = ()
    block: tuple[int, ...] = ()
    shared_mem_bytes: int = 0
    num_warps: int | None = None
    num_stages: int | None = None
    constants: dict[str, int] = field(default_factory=dict)
    # A CUDA launch as a thread-block cluster, and the arrays passed as TMA descriptors
    # (kernels.tma.TensorMapSpec); both empty for an ordinary launch.
    cluster: tuple[int, ...] = ()
    tensor_maps: tuple[Any, ...] = ()


class KernelError(Exception):
    """A learner error the backend recognised (wrong signature, bad launch)."""


class DeferredCompileError(Exception):
    """Raised by launch() when a lazy JIT (Numba, Triton) fails on the first call.

    The evaluator reports it as a compile error with the stage it carries.
    """

    def __init__(self, stage: CompileStage) -> None:
        super().__init__(stage.log)
        self.stage = stage


class CompiledKernel(ABC):
    """What compile() returns: launchable on kernel-ordered arguments."""

    @abstractmethod
    def launch(self, args: list[Any], spec: LaunchSpec) -> None:
        """Launch once, asynchronously where the device allows.

        `args` holds arrays of the backend's ArrayKind and NumPy scalars (np.int32,
        np.float32...) in the order of the problem's `args`.
        """

    def parameters(self) -> list[str] | None:
        """The kernel's parameter names (or placeholders), for the signature check."""
        return None

    def report(self) -> CompileStage | None:
        """Resources, PTX or SASS known only after the first launch (lazy JITs)."""
        return None


class Exporter(ABC):
    """The box's side of a GPU backend: the learner's module, loaded in the box.

    `build()` compiles one variant into an `Artifact` that the trusted evaluator loads
    with `Backend.load()`. Learner errors found while building raise
    DeferredCompileError (or KernelError), as a lazy JIT's first launch would.
    """

    @abstractmethod
    def build(self, variant: Variant) -> Artifact: ...

    def parameters(self) -> list[str] | None:
        return None


class Backend(ABC):
    key: ClassVar[str]
    title: ClassVar[str]
    language: ClassVar[str]  # editor language: "cpp" or "python"
    # In a learner's box: the compute capability ("9.0") of the device
    # the evaluator will load the artefacts on. None: ask the device itself.
    target_cc: str | None = None

    @abstractmethod
    def capability(self) -> Capability:
        """What this backend can do on this machine, cheaply decided."""

    def prepare_for(self, problem: Any) -> None:
        """Told the problem (a ProblemSpec) before a compile; a backend that builds per
        argument type (the CuTe DSL) takes the problem's types from it."""
        return None

    @abstractmethod
    def array_kind(self) -> ArrayKind:
        """The arrays launch() expects under the current capability."""

    @abstractmethod
    def compile(
        self, source: str, kernel_name: str, workdir: Path
    ) -> tuple[CompileStage, CompiledKernel | None]:
        """Compile `source`; the kernel entry point is `kernel_name`.

        Never raises for learner errors: a failed compile returns
        (CompileStage(ok=False, diagnostics=[...]), None) with line numbers that
        refer to the learner's source. Under compile-only, the stage is filled
        (resources, PTX, SASS) and the kernel is None.
        """

    def versions(self) -> dict[str, str]:
        """Library versions for the system report."""
        return {}

    # ------------------------------------------------ learner code in a box of its own

    def exports(self) -> bool:
        """True where compile() runs on a GPU and the box hands back artefacts instead."""
        return False

    def export(
        self, source: str, kernel_name: str, workdir: Path
    ) -> tuple[CompileStage, Exporter | None]:
        """In the box: load/compile the learner's source, ready to build artefacts."""
        raise NotImplementedError(f"the {self.key} backend builds no artefacts")

    def load(self, artifact: Artifact) -> CompiledKernel:
        """In the evaluator: a launchable kernel from an artefact the box built."""
        raise NotImplementedError(f"the {self.key} backend loads no artefacts")

    def untimed_reason(self) -> str | None:
        cap = self.capability()
        if cap is Capability.simulate:
            where = {"numba-cuda": "Numba's CUDA simulator", "triton": "Triton's interpreter"}
            return (
                f"ran in {where.get(self.key, 'a simulator')} on a machine without a GPU: "
                "checked for correctness, not timed"
            )
        if cap is Capability.compile_only:
            return "compiled, not run: this machine has no GPU"
        return None


_REGISTRY: dict[str, type[Backend]] = {}


def register(cls: type[Backend]) -> type[Backend]:
    _REGISTRY[cls.key] = cls
    return cls


def registry() -> dict[str, type[Backend]]:
    from kplay.kernels import backends as _pkg  # noqa: F401  (imports register the classes)

    return dict(_REGISTRY)


def get_backend(key: str) -> Backend:
    reg = registry()
    if key not in reg:
        raise KeyError(unknown("backend", key, reg))
    return reg[key]()
