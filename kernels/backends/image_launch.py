"""Kernel images built in a learner's box: the target they are built for, the parameters of
their PTX `.entry`, and loading and launching them in the trusted evaluator.

A GPU Python backend (Numba CUDA, Triton) hands the evaluator an `Artifact`: a cubin (or
PTX) with its entry symbol and the layout of its parameters. The evaluator launches it
through CuPy's driver-level module (cuModuleLoadData, cuModuleGetFunction,
cuLaunchKernel) on parameters it packs itself, so no learner code runs on its side.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from kplay.kernels.backends.base import KernelError

# Dynamic shared memory a kernel may take without opting in (cuFuncSetAttribute).
DEFAULT_SHARED_LIMIT = 48 * 1024
# CUfunction_attribute values: a loaded module's Function has no named properties for them.
_ATTR_SHARED_SIZE_BYTES = 1
_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

_ENTRY = re.compile(r"\.entry\s+([\w$.]+)\s*\(([^)]*)\)", re.S)
# `.param .u64 name`, `.param .u64 .ptr .global .align 1 name`, `.param .align 8 .b8 name[16]`
_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.([a-z]+)(\d+)\b[^,\[]*(?:\[(\d+)\])?")
_TARGET = re.compile(r"^\s*\.target\s+(\w+)", re.M)


def target_cc(cc: str | None) -> tuple[int, int]:
    """The compute capability to build for: `cc` ("9.0") where the evaluator named it (a
    learner's box sees no GPU), else the current GPU's, read through the driver."""
    if not cc:
        from kplay.kernels.hardware import NoGpu, current_gpu

        try:
            cc = current_gpu().compute_capability
        except NoGpu as exc:
            raise RuntimeError(f"no GPU to build kernel images for ({exc})") from None
    major, _, minor = str(cc).partition(".")
    return int(major), int(minor or 0)


def ptx_entry(ptx: str) -> tuple[str, list[int]]:
    """The PTX module's only `.entry`: its symbol and the size in bytes of each parameter."""
    entries = _ENTRY.findall(ptx)
    if len(entries) != 1:
        raise RuntimeError(f"expected one .entry in the PTX, found {len(entries)}")
    name, body = entries[0]
    sizes = []
    for param in (p for p in body.split(",") if p.strip()):
        match = _PARAM.search(param)
        if match is None:
            raise RuntimeError(f"unreadable PTX parameter: {param.strip()}")
        sizes.append(max(int(match[2]) // 8, 1) * int(match[3] or 1))
    return name, sizes


def ptx_target(ptx: str) -> str:
    """`sm_90a` from the PTX's `.target sm_90a` (empty when absent)."""
    match = _TARGET.search(ptx)
    return match[1] if match else ""


def check_layout(ctypes: list[str], ptx_sizes: list[int], what: str) -> None:
    """The parameters an ABI describes must be the PTX entry's, one for one, size for size."""
    sizes = [np.dtype(c).itemsize for c in ctypes]
    if sizes != ptx_sizes:
        raise RuntimeError(
            f"{what}: the parameter layout ({sizes} bytes) does not match "
            f"the PTX entry's ({ptx_sizes} bytes)"
        )


def bfloat16_bits(value: Any) -> np.uint16:
    """A number as the bits of a bfloat16, rounded to nearest even (NumPy has no bfloat16)."""
    bits = int(np.float32(value).view(np.uint32))
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF:  # NaN stays a NaN
        return np.uint16((bits >> 16) | 0x40)
    bits += 0x7FFF + ((bits >> 16) & 1)
    return np.uint16((bits >> 16) & 0xFFFF)


def scalar(ctype: str, value: Any) -> Any:
    """A NumPy scalar of `ctype` that CuPy passes by value, its size the parameter's."""
    if ctype == "bfloat16":
        return bfloat16_bits(value)
    return np.dtype(ctype).type(value)


def device_pointer(array: Any) -> int:
    """The device address of a CuPy array, a torch CUDA tensor, or any CUDA array."""
    data = getattr(array, "data", None)
    ptr = getattr(data, "ptr", None)  # CuPy
    if isinstance(ptr, int):
        return ptr
    if hasattr(array, "data_ptr"):  # torch
        return int(array.data_ptr())
    cai = getattr(array, "__cuda_array_interface__", None)
    if cai is None:
        raise KernelError(f"expected a device array, got {type(array).__name__}")
    return int(cai["data"][0])


class LoadedImage:
    """A cubin or PTX image, loaded on the first launch in the launching thread's context."""

    def __init__(self, image: bytes, fmt: str, entry: str) -> None:
        if fmt == "ptx" and not image.endswith(b"\0"):
            image += b"\0"  # cuModuleLoadData reads PTX as a C string
        self.image = image
        self.format = fmt
        self.entry = entry
        self._module: Any = None
        self._function: Any = None
        self._dynamic_limit = DEFAULT_SHARED_LIMIT

    def function(self) -> Any:
        if self._function is None:
            import cupy

            module = cupy.cuda.function.Module()
            try:
                module.load(self.image)
                function = module.get_function(self.entry)
            except cupy.cuda.driver.CUDADriverError as exc:
                raise KernelError(
                    f"the CUDA driver could not load the {self.format}: {exc}"
                ) from None
            self._module, self._function = module, function
        return self._function

    def shared_limits(self) -> tuple[int, int]:
        """(static shared bytes of the kernel, the most a block may have after opting in)."""
        import cupy

        function = self.function()
        optin = cupy.cuda.Device().attributes.get("MaxSharedMemoryPerBlockOptin", 0)
        static = cupy.cuda.driver.funcGetAttribute(_ATTR_SHARED_SIZE_BYTES, function.ptr)
        return int(static), int(optin) or DEFAULT_SHARED_LIMIT

    def launch(
        self,
        grid: tuple[int, ...],
        block: tuple[int, ...],
        params: list[Any],
        shared_mem: int = 0,
        stream: Any = None,
    ) -> None:
        """One cuLaunchKernel on `stream` (CuPy's current stream when None)."""
        function = self.function()
        if shared_mem > self._dynamic_limit:
            import cupy

            static, optin = self.shared_limits()
            if static + shared_mem > optin:
                raise KernelError(
                    f"the launch asks for {shared_mem} bytes of dynamic shared memory "
                    f"(and the kernel has {static} static); a block may have {optin}"
                )
            cupy.cuda.driver.funcSetAttribute(
                function.ptr, _ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(shared_mem)
            )
            self._dynamic_limit = shared_mem
        grid3 = (tuple(int(g) for g in grid) + (1, 1))[:3]
        block3 = (tuple(int(b) for b in block) + (1, 1))[:3]
        function(grid3, block3, tuple(params), shared_mem=int(shared_mem), stream=stream)
