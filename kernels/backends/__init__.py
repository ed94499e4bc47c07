"""Backends register themselves on import; see kernels.backends.base."""

from kplay.kernels.backends.base import (
    ArrayKind,
    Backend,
    Capability,
    CompiledKernel,
    KernelError,
    LaunchSpec,
    get_backend,
    register,
    registry,
)

__all__ = [
    "ArrayKind",
    "Backend",
    "Capability",
    "CompiledKernel",
    "KernelError",
    "LaunchSpec",
    "get_backend",
    "register",
    "registry",
]

# Each backend module is imported for its @register side effect. They import their
# heavy libraries lazily, so this stays cheap.
from kplay.kernels.backends import (  # noqa: E402, F401
    cuda,
    cute_dsl,
    cutlass,
    numba_cpu,
    numba_cuda,
    triton_backend,
)
