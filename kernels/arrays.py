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

# Float outputs start as a NaN of one marked bit pattern, so that "still holds the poison"
# is a comparison of bits, and a NaN the kernel wrote is not taken for one it never wrote.
# The NaNs are signalling (quiet bit clear): arithmetic on one gives another bit pattern
# (the CPU sets the quiet bit, a GPU gives its canonical NaN), so an output read and
# written again (`out[i] += x` before it was zeroed) no longer reads as never written.
FLOAT_POISON_BITS = {
    np.dtype("float16"): 0x7D5B,
    np.dtype("float32"): 0x7FA2BADB,
    np.dtype("float64"): 0x7FF42BADBEEF2BAD,
}


def to_numpy(arr: Any) -> Any:
    """A NumPy array of `arr`'s values: copied from the GPU for a CuPy array, else as is."""
    if on_device(arr):
        return arr.get()
    return arr


def poison_value(dtype: np.dtype) -> Any:
    """What an output of `dtype` holds before the launch: for float16/32/64 a NumPy scalar
    of that dtype holding the marked NaN (fill it with ArrayOps.fill, which keeps its bits)."""
    dtype = np.dtype(dtype)
    if dtype in FLOAT_POISON_BITS:
        return np.array(FLOAT_POISON_BITS[dtype], dtype=bits_dtype(dtype)).view(dtype)[()]
    if dtype.kind == "f":
        return float("nan")
    if dtype in INT_POISON:
        return INT_POISON[dtype]
    return int(np.iinfo(dtype).max)


def bits_dtype(dtype: np.dtype) -> np.dtype:
    """The signed integer type as wide as `dtype`: arrays are viewed as it to compare bits."""
    return np.dtype(f"int{8 * np.dtype(dtype).itemsize}")


def poison_bits(dtype: np.dtype) -> int:
    """The poison of `dtype` as an integer of bits_dtype(dtype) (what bits_of() compares)."""
    value = np.asarray(poison_value(dtype), dtype=dtype)
    return int(value.view(bits_dtype(dtype)))


def bits_of(arr: np.ndarray) -> np.ndarray:
    """The raw bits of a NumPy array (a view, no copy), as bits_dtype()'s integers."""
    return np.ascontiguousarray(arr).view(bits_dtype(arr.dtype))


def still_poisoned(arr: np.ndarray) -> np.ndarray:
    """Where a host output still holds, bit for bit, the poison it was filled with."""
    return bits_of(arr) == poison_bits(arr.dtype)


def _marked_nan(value: Any) -> tuple[np.dtype, int] | None:
    """(integer type, bits) to fill with for a NumPy float NaN scalar, else None."""
    if isinstance(value, np.floating) and np.isnan(value):
        return bits_dtype(value.dtype), int(np.asarray(value).view(bits_dtype(value.dtype)))
    return None


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
        dtype = np.dtype(dtype)
        value = 0 if zeros else poison_value(dtype)
        # A marked NaN is written as the integers of its bits: no float conversion on the
        # way (host or device) can change them.
        fill_dtype, marked = dtype, _marked_nan(value)
        if marked is not None:
            fill_dtype, value = marked
        if self.kind is ArrayKind.cupy:  # filled where it lives: nothing crosses the bus
            return self._cp.full(shape, value, dtype=fill_dtype).view(dtype)
        if self.kind is ArrayKind.torch_cuda:
            import cupy

            return self._torch.from_dlpack(cupy.full(shape, value, dtype=fill_dtype).view(dtype))
        if self.arena is not None:  # filled in the shared memory itself
            shared = self.arena.alloc_full(shape, fill_dtype, value).view(dtype)
            return shared if self.kind is ArrayKind.numpy else self._torch.from_numpy(shared)
        host = np.full(shape, value, dtype=fill_dtype).view(dtype)
        return self.to_device(host)

    def fill(self, dev: Any, value: Any) -> None:
        marked = _marked_nan(value)
        if marked is not None:  # the poison: written as the integers of its bits
            dev, value = self._as_ints(dev, marked[0]), marked[1]
        if self.kind is ArrayKind.numpy:
            dev.fill(value)
        elif self.kind is ArrayKind.cupy:
            dev.fill(value)
        else:
            dev.fill_(value)

    def _as_ints(self, dev: Any, ints: np.dtype) -> Any:
        """A view of a device array as the integers `ints` (same width, same memory)."""
        if self.kind in (ArrayKind.torch_cuda, ArrayKind.torch_cpu):
            return dev.view(getattr(self._torch, ints.name))
        return dev.view(ints)

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
