"""Array plumbing between the arrays a case's inputs are drawn as (NumPy on the host, or
CuPy for a large case on a GPU; see kernels.check.home_module) and the arrays a backend
launches on (CuPy device memory, torch tensors, or NumPy itself)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kplay.kernels.backends.base import ArrayKind
from kplay.kernels.draws import on_device
from kplay.kernels.shm import SharedArena

# Integers cannot hold NaN: unwritten integer outputs are caught with a sentinel.
INT_POISON = {np.dtype("int32"): -0x2BADBEEF, np.dtype("int64"): -0x2BADBEEF2BADBEEF}


def to_numpy(arr: Any) -> Any:
    """A NumPy array of `arr`'s values: copied from the GPU for a CuPy array, else as is."""
    if on_device(arr):
        return arr.get()
    return arr


def poison_value(dtype: np.dtype) -> float | int:
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return float("nan")
    if dtype in INT_POISON:
        return INT_POISON[dtype]
    return int(np.iinfo(dtype).max)


class ArrayOps:
    """Moves arrays for one ArrayKind. Methods are small on purpose: the harness composes them."""

    def __init__(self, kind: ArrayKind, arena: SharedArena | None = None) -> None:
        """`arena`: host arrays go to shared memory there, for a learner's box to use."""
        self.kind = kind
        self.arena = arena if kind in (ArrayKind.numpy, ArrayKind.torch_cpu) else None
        if kind is ArrayKind.cupy:
            import cupy

            self._cp = cupy
        elif kind in (ArrayKind.torch_cuda, ArrayKind.torch_cpu):
            import torch

            self._torch = torch

    def to_device(self, host: Any) -> Any:
        """A new array of the backend's kind holding `host`'s values (NumPy or CuPy)."""
        if on_device(host):
            return self._from_cupy(host)
        host = np.ascontiguousarray(host)
        if self.arena is not None:
            shared = self.arena.alloc_copy(host)
            return shared if self.kind is ArrayKind.numpy else self._torch.from_numpy(shared)
        if self.kind is ArrayKind.numpy:
            return host.copy()
        if self.kind is ArrayKind.cupy:
            return self._cp.asarray(host)
        tensor = self._torch.from_numpy(host.copy())
        return tensor.cuda() if self.kind is ArrayKind.torch_cuda else tensor

    def _from_cupy(self, arr: Any) -> Any:
        """A device-to-device copy of a CuPy array, as the backend's kind."""
        if self.kind is ArrayKind.cupy:
            return arr.copy()
        if self.kind is ArrayKind.torch_cuda:
            return self._torch.from_dlpack(arr.copy())
        return self.to_device(arr.get())

    def to_host(self, dev: Any) -> np.ndarray:
        if self.kind is ArrayKind.numpy:
            return np.array(dev, copy=True)
        if self.kind is ArrayKind.cupy:
            return self._cp.asnumpy(dev)
        return dev.detach().cpu().numpy().copy()

    def view_on_host(self, dev: Any) -> np.ndarray:
        """The array's values as NumPy to read: the array itself where it lives on the host
        (no copy), else a copy from the GPU."""
        if self.kind is ArrayKind.numpy:
            return np.asarray(dev)
        if self.kind is ArrayKind.torch_cpu:
            return dev.detach().numpy()
        return self.to_host(dev)

    def empty_like_poisoned(self, shape: tuple[int, ...], dtype: np.dtype, zeros: bool) -> Any:
        value = 0 if zeros else poison_value(dtype)
        if self.kind is ArrayKind.cupy:  # filled where it lives: nothing crosses the bus
            return self._cp.full(shape, value, dtype=dtype)
        if self.kind is ArrayKind.torch_cuda:
            import cupy

            return self._torch.from_dlpack(cupy.full(shape, value, dtype=dtype))
        if self.arena is not None:  # filled in the shared memory itself
            shared = self.arena.alloc_full(shape, np.dtype(dtype), value)
            return shared if self.kind is ArrayKind.numpy else self._torch.from_numpy(shared)
        host = np.full(shape, value, dtype=dtype)
        return self.to_device(host)

    def fill(self, dev: Any, value: float | int) -> None:
        if self.kind is ArrayKind.numpy:
            dev.fill(value)
        elif self.kind is ArrayKind.cupy:
            dev.fill(value)
        else:
            dev.fill_(value)

    def copy_from_host(self, dev: Any, host: Any) -> None:
        """Overwrite a device array in place (same buffer, new contents)."""
        if on_device(host) and self.on_gpu:
            self.as_cupy(dev)[...] = host
            return
        host = np.ascontiguousarray(to_numpy(host))
        if self.kind is ArrayKind.numpy:
            dev[...] = host
        elif self.kind is ArrayKind.cupy:
            dev.set(host)
        else:
            dev.copy_(self._torch.from_numpy(host.copy()))

    def flat(self, dev: Any) -> Any:
        """A one-dimensional view of a contiguous device array (same memory)."""
        if self.kind in (ArrayKind.torch_cuda, ArrayKind.torch_cpu):
            return dev.view(-1)
        return dev.reshape(-1)

    def put(self, flat: Any, positions: Any, values: Any) -> None:
        """flat[positions] = values where the array lives; both made by to_device()."""
        flat[positions] = values

    def as_cupy(self, dev: Any) -> Any:
        """A CuPy view of a device array (zero copy), for library baselines."""
        if self.kind is ArrayKind.cupy:
            return dev
        import cupy

        return cupy.asarray(dev)

    def synchronize(self) -> None:
        if self.kind is ArrayKind.cupy:
            self._cp.cuda.Device().synchronize()
        elif self.kind is ArrayKind.torch_cuda:
            self._torch.cuda.synchronize()

    @property
    def on_gpu(self) -> bool:
        return self.kind in (ArrayKind.cupy, ArrayKind.torch_cuda)


def scalar(value: float | int, dtype: str) -> Any:
    """A typed NumPy scalar, so that backends pass the right C type."""
    return np.dtype(dtype).type(value)
