"""Host arrays in shared memory, so that a learner's box works on the evaluator's arrays.

The evaluator makes every host array a backend launches on in a segment of its own (an
anonymous `memfd`), hands the box each new segment's descriptor once, and from then on
names an argument by (segment, offset, dtype, shape, strides). The box maps the same
pages: what the learner's function writes is what the evaluator checks, with no copy in
either direction. Segments live until the arena closes at the end of the job.
"""

from __future__ import annotations

import bisect
import mmap
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

_PAGE = mmap.PAGESIZE
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)


@dataclass
class _Segment:
    ident: int
    fd: int
    size: int
    mm: mmap.mmap
    raw: np.ndarray  # the whole segment as bytes; its address is the segment's

    @property
    def address(self) -> int:
        return int(self.raw.ctypes.data)


class SharedArena:
    """The evaluator's side: allocates segments and says where an array lives."""

    def __init__(self) -> None:
        # Called after each new segment is filled: the box maps it then, outside any
        # timed repetition (its first touch there would otherwise be timed).
        self.on_new: Callable[[], None] | None = None
        self._segments: dict[int, _Segment] = {}
        self._starts: list[tuple[int, int]] = []  # (address, ident), sorted
        self._unsent: list[int] = []
        self._next = 1

    def alloc_copy(self, host: np.ndarray) -> np.ndarray:
        """A copy of `host` (C-contiguous) in a new segment."""
        host = np.ascontiguousarray(host)
        seg = self._new_segment(max(host.nbytes, 1))
        out = np.ndarray(host.shape, dtype=host.dtype, buffer=seg.mm, offset=0)
        out[...] = host
        if self.on_new is not None:
            self.on_new()
        return out

    def alloc_full(self, shape: tuple[int, ...], dtype: np.dtype, value: float | int) -> np.ndarray:
        """A new segment holding an array of `shape` filled with `value` (no host copy)."""
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        seg = self._new_segment(max(count * dtype.itemsize, 1))
        out = np.ndarray(shape, dtype=dtype, buffer=seg.mm, offset=0)
        out.fill(value)
        if self.on_new is not None:
            self.on_new()
        return out

    def _new_segment(self, nbytes: int) -> _Segment:
        size = -(-nbytes // _PAGE) * _PAGE
        fd = os.memfd_create(f"kplay-arg-{self._next}", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            mm = mmap.mmap(fd, size)
        except OSError:
            os.close(fd)
            raise
        seg = _Segment(self._next, fd, size, mm, np.frombuffer(mm, dtype=np.uint8))
        self._next += 1
        self._segments[seg.ident] = seg
        bisect.insort(self._starts, (seg.address, seg.ident))
        self._unsent.append(seg.ident)
        return seg

    def take_unsent(self) -> list[tuple[int, int, int]]:
        """(ident, size, fd) of every segment the box has not been given yet."""
        out = [(i, self._segments[i].size, self._segments[i].fd) for i in self._unsent]
        self._unsent = []
        return out

    def locate(self, array: Any) -> dict[str, Any]:
        """Where a NumPy array or a CPU torch tensor of this arena lives."""
        if hasattr(array, "data_ptr"):  # torch: the same memory seen through NumPy
            import torch

            from kplay.kernels.arrays import numpy_view

            array = numpy_view(torch, array)
        address = int(array.__array_interface__["data"][0])
        pos = bisect.bisect_right(self._starts, (address, 1 << 62)) - 1
        if pos < 0:
            raise ValueError("the array is not in shared memory")
        start, ident = self._starts[pos]
        seg = self._segments[ident]
        lowest, highest = 0, array.itemsize
        for n, stride in zip(array.shape, array.strides, strict=True):
            if n > 1:
                reach = (n - 1) * stride
                lowest, highest = lowest + min(reach, 0), highest + max(reach, 0)
        if array.size and not (start <= address + lowest and address + highest <= start + seg.size):
            raise ValueError("the array is not inside one shared segment")
        return {
            "seg": ident,
            "offset": address - start,
            "dtype": _dtype_name(array.dtype),
            "shape": list(array.shape),
            "strides": list(array.strides),
        }

    def close(self) -> None:
        for seg in self._segments.values():
            try:
                os.close(seg.fd)
            except OSError:
                pass
        self._segments.clear()
        self._starts.clear()


class MappedSegments:
    """The box's side: the segments it was given, and arrays over them."""

    def __init__(self) -> None:
        self._maps: dict[int, mmap.mmap] = {}

    def add(self, ident: int, size: int, fd: int) -> None:
        """Map a segment with its page tables filled now, not at a timed first touch."""
        try:
            self._maps[ident] = mmap.mmap(fd, size, flags=mmap.MAP_SHARED | _POPULATE)
        finally:
            os.close(fd)

    def array(self, where: dict[str, Any]) -> np.ndarray:
        mm = self._maps[int(where["seg"])]
        return np.ndarray(
            tuple(where["shape"]),
            dtype=_dtype_named(str(where["dtype"])),
            buffer=mm,
            offset=int(where["offset"]),
            strides=tuple(where["strides"]),
        )


def _dtype_name(dtype: np.dtype) -> str:
    """How a segment's element type travels: NumPy's type string, or the name of an
    ml_dtypes type (bfloat16, float8...), whose type string is a bare `<V2`."""
    from kplay.kernels import dtypes

    info = dtypes.of_storage(dtype)
    return info.name if info is not None and info.extension else dtype.str


def _dtype_named(name: str) -> np.dtype:
    from kplay.kernels import dtypes

    info = dtypes.DTYPES.get(name)
    return info.storage if info is not None and info.extension else np.dtype(name)
