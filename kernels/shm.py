"""Host arrays in shared memory, so that a learner's box works on the evaluator's arrays.

The evaluator makes every host array a backend launches on in a segment of its own (an
anonymous `memfd`), hands the box each new segment's descriptor once, and from then on
names an argument by (segment, offset, dtype, shape, strides). The box maps the same
pages: what the learner's function writes is what the evaluator checks, with no copy in
either direction.

A warm evaluator keeps one arena from job to job: at a job's end its segments are
recycled (`recycle`), and a later allocation of the same page-rounded size takes one
back instead of a new memfd, so its pages are touched once per evaluator rather than
once per job (a first touch costs 200-300 MB/s on a small VM, bench/RESULTS.md). A
recycled segment is written in full before any box is given it: the array over its
whole length, the rest of its last page zeroed. A new box (`new_box`) is given only
the segments of the job at hand, never a recycled one that no allocation took, and an
array outside those (a stale one of an earlier job) cannot be named in a launch.
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
# Recycled segments kept beyond this many bytes are closed, the largest share first. A
# job holds its segments at once anyway, so keeping one job's worth adds nothing to the
# peak: numba-cpu's largest case (512 MiB of inputs, two sets of buffers) takes 1.05 GiB.
RECYCLE_BYTES = 2 << 30


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
        self._live: dict[int, None] = {}  # the job's segments, in the order they came
        self._free: dict[int, list[int]] = {}  # recycled segments by size, oldest first
        self._sent: set[int] = set()  # segments the current box has mapped
        self._dropped: list[int] = []  # closed here, still mapped by the current box
        self._next = 1
        self.reused = 0  # allocations served by a recycled segment, for benchmarks

    def alloc_copy(self, host: np.ndarray) -> np.ndarray:
        """A copy of `host` (C-contiguous) in a segment of its own."""
        host = np.ascontiguousarray(host)
        seg = self._segment_for(max(host.nbytes, 1))
        out = np.ndarray(host.shape, dtype=host.dtype, buffer=seg.mm, offset=0)
        out[...] = host
        if self.on_new is not None:
            self.on_new()
        return out

    def alloc_full(self, shape: tuple[int, ...], dtype: np.dtype, value: float | int) -> np.ndarray:
        """A segment of its own holding an array of `shape` filled with `value`."""
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        seg = self._segment_for(max(count * dtype.itemsize, 1))
        out = np.ndarray(shape, dtype=dtype, buffer=seg.mm, offset=0)
        out.fill(value)
        if self.on_new is not None:
            self.on_new()
        return out

    def _segment_for(self, nbytes: int) -> _Segment:
        """A recycled segment of the right size (its tail past `nbytes` zeroed), else a new one."""
        size = -(-nbytes // _PAGE) * _PAGE
        spare = self._free.get(size)
        if not spare:
            seg = self._new_segment(size)
        else:
            seg = self._segments[spare.pop(0)]
            seg.raw[nbytes:] = 0  # the caller writes [0, nbytes)
            self.reused += 1
        self._live[seg.ident] = None
        return seg

    def _new_segment(self, size: int) -> _Segment:
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
        return seg

    def take_unsent(self) -> list[tuple[int, int, int]]:
        """(ident, size, fd) of every segment of this job the box has not been given yet."""
        new = [i for i in self._live if i not in self._sent]
        self._sent.update(new)
        return [(i, self._segments[i].size, self._segments[i].fd) for i in new]

    def take_dropped(self) -> list[int]:
        """Segments closed here that the current box still maps: it should let them go."""
        out, self._dropped = self._dropped, []
        return out

    def recycle(self) -> None:
        """The job is over: its segments wait for the next job's allocations of their size."""
        for ident in self._live:
            self._free.setdefault(self._segments[ident].size, []).append(ident)
        self._live.clear()
        kept = sum(self._segments[i].size for idents in self._free.values() for i in idents)
        while kept > RECYCLE_BYTES:
            size = max(self._free, key=lambda s: s * len(self._free[s]))
            ident = self._free[size].pop(0)
            if not self._free[size]:
                del self._free[size]
            kept -= size
            self._forget(ident)

    def new_box(self) -> None:
        """A new box maps nothing yet: each segment of the job is handed over on first use."""
        self._sent.clear()
        self._dropped.clear()

    def _forget(self, ident: int) -> None:
        seg = self._segments.pop(ident)
        self._starts.remove((seg.address, ident))
        try:
            os.close(seg.fd)
        except OSError:
            pass
        if ident in self._sent:
            self._sent.discard(ident)
            self._dropped.append(ident)

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
        if ident not in self._live:
            raise ValueError("the array is not in a shared segment of this job")
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
        self._live.clear()
        self._free.clear()


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

    def drop(self, ident: int) -> None:
        """Unmap a segment the evaluator closed (arrays over it keep it until they go)."""
        self._maps.pop(ident, None)

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
