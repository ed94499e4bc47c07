"""Array plumbing between NumPy (where inputs are generated and checked) and the arrays a
backend launches on (CuPy device memory, torch tensors, or NumPy itself)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kplay.kernels.backends.base import ArrayKind
from kplay.kernels.shm import SharedArena

# Integers cannot hold NaN: unwritten integer outputs are caught with a sentinel.
INT_POISON = {np.dtype("int32"): -0x2BADBEEF, np.dtype("int64"): -0x2BADBEEF2BADBEEF}


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

    def to_device(self, host: np.ndarray) -> Any:
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

    def to_host(self, dev: Any) -> np.ndarray:
        if self.kind is ArrayKind.numpy:
            return np.array(dev, copy=True)
        if self.kind is ArrayKind.cupy:
            return self._cp.asnumpy(dev)
        return dev.detach().cpu().numpy().copy()

    def empty_like_poisoned(self, shape: tuple[int, ...], dtype: np.dtype, zeros: bool) -> Any:
        host = np.full(shape, 0 if zeros else poison_value(dtype), dtype=dtype)
        return self.to_device(host)

    def fill(self, dev: Any, value: float | int) -> None:
        if self.kind is ArrayKind.numpy:
            dev.fill(value)
        elif self.kind is ArrayKind.cupy:
            dev.fill(value)
        else:
            dev.fill_(value)

    def copy_from_host(self, dev: Any, host: np.ndarray) -> None:
        """Overwrite a device array in place (same buffer, new contents)."""
        host = np.ascontiguousarray(host)
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
