"""A CUDA C++ kernel loaded in the evaluator, launched through CuPy with checked launch
parameters (or through cuLaunchKernelEx where the launch line asks for a cluster or TMA
descriptors: kernels.backends.exlaunch)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kplay.kernels.backends.base import CompiledKernel, KernelError, LaunchSpec
from kplay.kernels.backends.exlaunch import ExLauncher

# Dynamic shared memory above this needs the kernel's opt-in before launch.
_STATIC_SMEM_DEFAULT = 48 * 1024


@dataclass
class _Limits:
    block: tuple[int, int, int]
    grid: tuple[int, int, int]
    threads: int
    smem_optin: int


class CupyKernel(CompiledKernel):
    """One NVRTC-compiled kernel, launched through CuPy with checked launch parameters."""

    def __init__(self, function: Any, params: list[str] | None, limits: _Limits) -> None:
        self.function = function
        self._params = params
        self._limits = limits
        self._ex: ExLauncher | None = None  # clusters and tensor maps (cuLaunchKernelEx)

    def parameters(self) -> list[str] | None:
        return self._params

    def set_parameters(self, params: list[str] | None) -> None:
        self._params = params

    def launch(self, args: list[Any], spec: LaunchSpec) -> None:
        grid = self._dims(spec.grid, "grid")
        block = self._dims(spec.block, "block")
        self._check(grid, self._limits.grid, "grid")
        self._check(block, self._limits.block, "block")
        self._check_threads(block)
        self._prepare_shared(spec.shared_mem_bytes)
        if spec.cluster or spec.tensor_maps:
            if self._ex is None:
                self._ex = ExLauncher(self.function)
            self._ex.launch(grid, block, args, spec)
            return
        self.function(grid, block, tuple(args), shared_mem=spec.shared_mem_bytes)

    @staticmethod
    def _dims(dims: tuple[int, ...], what: str) -> tuple[int, int, int]:
        if not 1 <= len(dims) <= 3:
            raise KernelError(f"the {what} needs 1 to 3 dimensions, got {len(dims)}")
        if any(int(d) < 1 for d in dims):
            raise KernelError(f"every {what} dimension must be at least 1, got {tuple(dims)}")
        padded = [int(d) for d in dims] + [1] * (3 - len(dims))
        return padded[0], padded[1], padded[2]

    @staticmethod
    def _check(dims: tuple[int, int, int], limit: tuple[int, int, int], what: str) -> None:
        for axis, value, most in zip("xyz", dims, limit, strict=True):
            if value > most:
                raise KernelError(f"{what} {axis} = {value} exceeds this device's limit of {most}")

    def _check_threads(self, block: tuple[int, int, int]) -> None:
        threads = block[0] * block[1] * block[2]
        if threads > self._limits.threads:
            raise KernelError(
                f"a block of {block} has {threads} threads; "
                f"a block holds at most {self._limits.threads}"
            )
        kernel_most = int(getattr(self.function, "max_threads_per_block", threads))
        if threads > kernel_most:
            regs = getattr(self.function, "num_regs", "?")
            raise KernelError(
                f"a block of {threads} threads is more than this kernel can launch "
                f"({kernel_most}): it uses {regs} registers per thread"
            )

    def _prepare_shared(self, dynamic: int) -> None:
        if dynamic < 0:
            raise KernelError(f"shared_mem_bytes must not be negative, got {dynamic}")
        static = int(getattr(self.function, "shared_size_bytes", 0))
        if dynamic + static > self._limits.smem_optin:
            raise KernelError(
                f"the launch asks for {dynamic} bytes of dynamic shared memory "
                f"(plus {static} static); this device allows at most "
                f"{self._limits.smem_optin} bytes per block"
            )
        if dynamic > _STATIC_SMEM_DEFAULT and self.function.max_dynamic_shared_size_bytes < dynamic:
            # Above 48 KiB a kernel must opt in before launch.
            self.function.max_dynamic_shared_size_bytes = dynamic


@lru_cache(maxsize=8)
def _device_limits(device_id: int) -> _Limits:
    import cupy

    attrs = cupy.cuda.Device(device_id).attributes
    return _Limits(
        block=(attrs["MaxBlockDimX"], attrs["MaxBlockDimY"], attrs["MaxBlockDimZ"]),
        grid=(attrs["MaxGridDimX"], attrs["MaxGridDimY"], attrs["MaxGridDimZ"]),
        threads=attrs["MaxThreadsPerBlock"],
        smem_optin=attrs.get("MaxSharedMemoryPerBlockOptin", attrs["MaxSharedMemoryPerBlock"]),
    )
