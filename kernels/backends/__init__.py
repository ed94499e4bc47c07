"""Backends register themselves on import; see kernels.backends.base."""

from kernels.backends.base import (
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
for _mod in ("cuda", "numba_cuda", "triton_backend", "numba_cpu"):
    try:
        __import__(f"kernels.backends.{_mod}")
    except ModuleNotFoundError as _exc:  # pragma: no cover - a module not written yet
        if _exc.name != f"kernels.backends.{_mod}":
            raise
