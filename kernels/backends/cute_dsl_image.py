"""CuTe DSL kernels as images: the parameter layout, and launching them in the evaluator.

A `@cute.kernel` takes each `cute.Tensor` argument by value, as one struct: the data
pointer, then the layout's dynamic values. The learner's box (kernels.backends.cute_dsl)
builds every array as a tensor of dynamic shape with a row-major stride whose last
entry is a static 1, so its struct is

    { u64 data; i32 shape[ndim]; i32 stride[ndim - 1] }   (in elements, 8-byte aligned)

and a scalar argument is one parameter of its own type. The artefact's `abi["params"]`
lists them in order, with each struct's size, as the box read them back from the host
code the DSL generated; the evaluator packs exactly that and launches the cubin with
cuLaunchKernel through CuPy's driver module. No learner code runs on this side.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from kplay.kernels import dtypes
from kplay.kernels.artifact import Artifact
from kplay.kernels.backends.base import CompiledKernel, KernelError, LaunchSpec
from kplay.kernels.backends.image_launch import LoadedImage, device_pointer, scalar

CONVENTION = "cute-dsl/1"
# The DSL is told that every array starts on this boundary (it may vectorise on it).
ASSUMED_ALIGN = 16
_I32_MAX = 2**31 - 1


def tensor_struct_size(ndim: int) -> int:
    """Bytes of a tensor parameter: the pointer, ndim shapes and ndim - 1 strides, padded to 8."""
    raw = 8 + 4 * (ndim + max(ndim - 1, 0))
    return (raw + 7) // 8 * 8


def pack_tensor(ptr: int, shape: tuple[int, ...], strides: tuple[int, ...], size: int) -> bytes:
    """The struct for one tensor: `strides` in elements, the last one 1 (row-major)."""
    if ptr % ASSUMED_ALIGN:
        raise KernelError(f"array at {ptr:#x} is not {ASSUMED_ALIGN}-byte aligned")
    if shape and strides[-1] != 1 and shape[-1] > 1:
        raise KernelError("a CuTe DSL tensor needs a contiguous last dimension")
    values = [*shape, *strides[:-1]]
    if any(v < 0 or v > _I32_MAX for v in values):
        raise KernelError(f"shape {shape} or strides {strides} do not fit 32-bit layout values")
    raw = np.uint64(ptr).tobytes() + np.asarray(values, dtype=np.int32).tobytes()
    if len(raw) > size:
        raise KernelError(
            f"a {len(shape)}-D tensor needs {len(raw)} bytes, the kernel takes {size}"
        )
    return raw + bytes(size - len(raw))


def _held_as(name: str) -> tuple[str, ...]:
    """The device array types that hold elements of `name`: itself, and for bfloat16 and
    float8 the unsigned integers of their bits, as CuPy holds them (kernels.arrays)."""
    info = dtypes.DTYPES.get(name)
    # Late: kernels.arrays imports the backends' package, which imports this module.
    from kplay.kernels.arrays import _on_device

    return (name, _on_device(info.storage).name) if info is not None else (name,)


def pack_params(params: list[dict[str, Any]], args: list[Any]) -> list[bytes]:
    """Each kernel parameter's bytes, from the launch's arrays and scalars."""
    if len(params) != len(args):
        raise KernelError(
            f"the kernel takes {len(params)} arguments, the launch passes {len(args)}"
        )
    out = []
    for p, arg in zip(params, args, strict=True):
        if p["kind"] == "tensor":
            if getattr(arg, "ndim", None) != p["ndim"]:
                raise KernelError(f"argument {p['arg']}: expected a {p['ndim']}-D array")
            if np.dtype(arg.dtype).name not in _held_as(p["dtype"]):
                raise KernelError(f"argument {p['arg']}: expected {p['dtype']}, got {arg.dtype}")
            item = np.dtype(arg.dtype).itemsize
            strides = tuple(int(s) // item for s in arg.strides)
            shape = tuple(int(s) for s in arg.shape)
            out.append(pack_tensor(device_pointer(arg), shape, strides, int(p["size"])))
        else:
            out.append(scalar(p["dtype"], arg).tobytes())
    return out


class ParamBlock:
    """kernelParams for cuLaunchKernel: one pointer per parameter, to its packed bytes."""

    def __init__(self, packed: list[bytes]) -> None:
        self._buffers = [ctypes.create_string_buffer(b, max(len(b), 1)) for b in packed]
        self._pointers = (ctypes.c_void_p * max(len(packed), 1))(
            *[ctypes.cast(b, ctypes.c_void_p) for b in self._buffers]
        )

    @property
    def address(self) -> int:
        return ctypes.addressof(self._pointers)

    def read(self, index: int) -> bytes:
        """The bytes parameter `index` points at (what the driver will copy)."""
        ptr = self._pointers[index]
        return ctypes.string_at(ptr, len(self._buffers[index].raw))


def check_abi(artifact: Artifact) -> list[dict[str, Any]]:
    abi = artifact.abi
    if abi.get("convention") != CONVENTION:
        raise KernelError(f"unknown CuTe DSL parameter convention {abi.get('convention')!r}")
    params = list(abi.get("params", []))
    for p in params:
        if p.get("kind") == "tensor" and int(p["size"]) != tensor_struct_size(int(p["ndim"])):
            raise KernelError(f"argument {p.get('arg')}: tensor struct of {p['size']} bytes")
    return params


class CuteImageKernel(CompiledKernel):
    """A cubin from the box, launched with the problem's grid and block."""

    def __init__(self, artifact: Artifact) -> None:
        self.params = check_abi(artifact)
        self.image = LoadedImage(artifact.image(), artifact.format, artifact.entry)
        self.stage = artifact.stage

    def parameters(self) -> list[str] | None:
        return [str(p["arg"]) for p in self.params]

    def report(self) -> Any:
        return self.stage

    def launch(self, args: list[Any], spec: LaunchSpec) -> None:
        import cupy

        block = ParamBlock(pack_params(self.params, args))
        function = self.image.function()
        grid3 = (tuple(int(g) for g in spec.grid) + (1, 1, 1))[:3]
        block3 = (tuple(int(b) for b in spec.block) + (1, 1, 1))[:3]
        stream = cupy.cuda.get_current_stream().ptr
        # cuLaunchKernel copies the parameters before it returns: `block` may go after.
        cupy.cuda.driver.launchKernel(
            function.ptr, *grid3, *block3, int(spec.shared_mem_bytes), stream, block.address, 0
        )
