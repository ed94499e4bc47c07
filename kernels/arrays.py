"""Array plumbing between the arrays a case's inputs are drawn as (NumPy on the host, or
CuPy for a large case on a GPU; see kernels.check.home_module) and the arrays a backend
launches on (CuPy device memory, torch tensors, or NumPy itself)."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from kplay.kernels import dtypes
from kplay.kernels.backends.base import ArrayKind
from kplay.kernels.draws import on_device
from kplay.kernels.shm import SharedArena

# Float outputs start as a NaN of one marked bit pattern, so that "still holds the poison"
# is a comparison of bits, and a NaN the kernel wrote is not taken for one it never wrote.
# The NaNs are signalling (quiet bit clear): arithmetic on one gives another bit pattern
# (the CPU sets the quiet bit, a GPU gives its canonical NaN), so an output read and
# written again (`out[i] += x` before it was zeroed) no longer reads as never written.
# float8_e4m3fn has a single NaN pattern (0x7F), which is its poison: NaN never passes a
# comparison, but a NaN the kernel wrote reads there as never written.
FLOAT_POISON_BITS = {
    np.dtype("float16"): 0x7D5B,
    np.dtype(ml_dtypes.bfloat16): 0x7FA5,
    np.dtype("float32"): 0x7FA2BADB,
    np.dtype("float64"): 0x7FF42BADBEEF2BAD,
    np.dtype(ml_dtypes.float8_e5m2): 0x7D,
    np.dtype(ml_dtypes.float8_e4m3fn): 0x7F,
}

# Integers (and the packed 4-bit types, stored as uint8) have no spare bit pattern: every
# value is legal data. Their outputs start as the fill below; the checker launches once
# more with every bit flipped (the second fill) wherever the first fill alone could not
# tell an unwritten element from a written one (kernels.fills). Bytes, for any width.
INT_FILL_BITS = {1: 0xA5, 2: 0xD411, 4: 0xD4524111, 8: 0xD4524110D4524111}
# A bool is one byte holding 0 or 1: the byte 0x5A is neither, so an unwritten bool is
# told from data in one launch.
BOOL_FILL_BITS = 0x5A
# Kept for the code that names the int32 and int64 poison by value.
INT_POISON = {
    np.dtype("int32"): -0x2BADBEEF,
    np.dtype("int64"): -0x2BADBEEF2BADBEEF,
}


def to_numpy(arr: Any) -> Any:
    """A NumPy array of `arr`'s values: copied from the GPU for a CuPy array, else as is."""
    if on_device(arr):
        return arr.get()
    return arr


def poison_value(dtype: np.dtype, second: bool = False) -> Any:
    """What an output of `dtype` holds before the launch, as a NumPy scalar (fill it with
    ArrayOps.fill, which keeps its bits): the marked NaN of a float type; the fill of an
    integer type (with `second`, its complement); for bool a uint8 scalar of the byte."""
    dtype = np.dtype(dtype)
    if dtype in FLOAT_POISON_BITS:
        return np.array(FLOAT_POISON_BITS[dtype], dtype=bits_dtype(dtype)).view(dtype)[()]
    if dtype == np.bool_:
        return np.uint8(BOOL_FILL_BITS ^ (0xFF if second else 0))
    if dtype.kind in "iu":
        width = dtype.itemsize
        bits = INT_FILL_BITS[width] ^ (((1 << (8 * width)) - 1) if second else 0)
        return np.array(bits, dtype=f"uint{8 * width}").view(dtype)[()]
    return float("nan")


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
    if isinstance(value, np.generic) and dtypes.is_float(value.dtype) and np.isnan(value):
        return bits_dtype(value.dtype), int(np.asarray(value).view(bits_dtype(value.dtype)))
    return None


def _torch_dtype(torch: Any, dtype: np.dtype) -> Any:
    info = dtypes.of_storage(dtype)
    return getattr(torch, info.torch if info is not None else np.dtype(dtype).name)


def _is_extension(dtype: Any) -> bool:
    info = dtypes.of_storage(dtype)
    return info is not None and info.extension


def _on_device(dtype: np.dtype) -> np.dtype:
    """How CuPy holds an array of `dtype`: ml_dtypes types as unsigned integers of their bits."""
    return dtypes.bits_int(dtype, unsigned=True) if _is_extension(dtype) else dtype


def _device_bits(host: np.ndarray) -> np.ndarray:
    return host.view(_on_device(host.dtype))


def _numpy_dtype(torch_dtype: Any) -> np.dtype | None:
    """The ml_dtypes type of a torch bfloat16 or float8 tensor; None for the others."""
    name = str(torch_dtype).removeprefix("torch.")
    for info in dtypes.DTYPES.values():
        if info.extension and info.torch == name:
            return info.storage
    return None


def torch_view(torch: Any, arr: np.ndarray) -> Any:
    """A torch tensor sharing `arr`'s memory; an ml_dtypes array (which torch.from_numpy
    refuses) goes through its bits, then is viewed as torch's own type."""
    if _is_extension(arr.dtype):
        bits = torch.from_numpy(arr.view(bits_dtype(arr.dtype)))
        return bits.view(_torch_dtype(torch, arr.dtype))
    return torch.from_numpy(arr)


def numpy_view(torch: Any, tensor: Any) -> np.ndarray:
    """A NumPy view of a CPU tensor: bfloat16 and float8 through their bits."""
    storage = _numpy_dtype(tensor.dtype)
    if storage is not None:
        ints = getattr(torch, bits_dtype(storage).name)
        return tensor.view(ints).numpy().view(storage)
    return tensor.numpy()


def _bits_fill(value: Any, dtype: np.dtype | None) -> tuple[np.dtype, int] | None:
    """(integer type, bits) for a fill value whose bits must be written as they are: a
    marked NaN, or a bool's fill byte (a uint8 scalar filling a bool array)."""
    marked = _marked_nan(value)
    if marked is not None:
        return marked
    if dtype == np.bool_ and isinstance(value, np.uint8):
        return np.dtype(np.int8), int(np.asarray(value).view(np.int8))
    return None


def _fill_as(dtype: np.dtype, value: Any) -> tuple[np.dtype, Any]:
    ints = _bits_fill(value, dtype)
    return (dtype, value) if ints is None else ints


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
            return shared if self.kind is ArrayKind.numpy else self._tensor(shared)
        if self.kind is ArrayKind.numpy:
            return host.copy()
        if self.kind is ArrayKind.cupy:
            return self._cp.asarray(_device_bits(host))
        tensor = self._tensor(host.copy())
        return tensor.cuda() if self.kind is ArrayKind.torch_cuda else tensor

    def _tensor(self, arr: np.ndarray) -> Any:
        return torch_view(self._torch, arr)

    def _numpy_of(self, tensor: Any) -> np.ndarray:
        return numpy_view(self._torch, tensor)

    def _from_cupy(self, arr: Any) -> Any:
        """A device-to-device copy of a CuPy array, as the backend's kind."""
        if self.kind is ArrayKind.cupy:
            return arr.copy()
        if self.kind is ArrayKind.torch_cuda:
            return self._torch.from_dlpack(arr.copy())
        return self.to_device(arr.get())

    def to_host(self, dev: Any) -> np.ndarray:
        """A host copy; a CuPy array of an ml_dtypes type comes back as its bits (view it
        with kernels.dtypes.as_declared)."""
        if self.kind is ArrayKind.numpy:
            return np.array(dev, copy=True)
        if self.kind is ArrayKind.cupy:
            return self._cp.asnumpy(dev)
        return self._numpy_of(dev.detach().cpu()).copy()

    def view_on_host(self, dev: Any) -> np.ndarray:
        """The array's values as NumPy to read: the array itself where it lives on the host
        (no copy), else a copy from the GPU."""
        if self.kind is ArrayKind.numpy:
            return np.asarray(dev)
        if self.kind is ArrayKind.torch_cpu:
            return self._numpy_of(dev.detach())
        return self.to_host(dev)

    def for_kernel(self, dev: Any) -> Any:
        """What the kernel is launched with: `dev` itself, or for a NumPy array of an
        ml_dtypes type a view of its bits (Numba has no bfloat16 or float8 arrays)."""
        if self.kind is ArrayKind.numpy:
            return dtypes.kernel_view(dev)
        return dev

    def empty_like_poisoned(self, shape: tuple[int, ...], dtype: np.dtype, zeros: bool) -> Any:
        dtype = np.dtype(dtype)
        value = 0 if zeros else poison_value(dtype)
        # A marked NaN (and a bool's fill byte) is written as the integers of its bits: no
        # conversion on the way (host or device) can change them.
        fill_dtype, value = _fill_as(dtype, value)
        if self.kind is ArrayKind.cupy:  # filled where it lives: nothing crosses the bus
            return self._cp.full(shape, value, dtype=fill_dtype).view(_on_device(dtype))
        if self.kind is ArrayKind.torch_cuda:
            import cupy

            filled = cupy.full(shape, value, dtype=fill_dtype).view(_on_device(dtype))
            tensor = self._torch.from_dlpack(filled)
            return tensor.view(_torch_dtype(self._torch, dtype))
        if self.arena is not None:  # filled in the shared memory itself
            shared = self.arena.alloc_full(shape, fill_dtype, value).view(dtype)
            return shared if self.kind is ArrayKind.numpy else self._tensor(shared)
        host = np.full(shape, value, dtype=fill_dtype).view(dtype)
        return self.to_device(host)

    def fill(self, dev: Any, value: Any) -> None:
        ints = _bits_fill(value, self._dtype_of(dev))
        if ints is not None:  # the poison: written as the integers of its bits
            dev, value = self._as_ints(dev, ints[0]), ints[1]
        if self.kind is ArrayKind.numpy:
            dev.fill(value)
        elif self.kind is ArrayKind.cupy:
            dev.fill(value)
        else:
            dev.fill_(value)

    def _dtype_of(self, dev: Any) -> np.dtype | None:
        if self.kind in (ArrayKind.torch_cuda, ArrayKind.torch_cpu):
            return np.dtype(np.bool_) if dev.dtype == self._torch.bool else None
        return np.dtype(dev.dtype)

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
            dev.set(_device_bits(host))
        else:
            dev.copy_(self._tensor(host.copy()))

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

        storage = _numpy_dtype(dev.dtype) if hasattr(dev, "detach") else None
        if storage is not None:  # a torch bfloat16 or float8 tensor: its bits
            return cupy.asarray(dev.view(getattr(self._torch, bits_dtype(storage).name)))
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
    return dtypes.get(dtype).storage.type(value)
