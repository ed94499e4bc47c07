"""Launches that CuPy's kernel call cannot make: thread-block clusters and tensor maps.

`cuLaunchKernelEx` (through `cuda-bindings`) takes the cluster's shape as a launch
attribute, and the parameters as a list of pointers to their bytes, so a 128-byte
`CUtensorMap` travels by value like any other argument. The evaluator packs every
parameter itself, as the CuPy path does: arrays become their device addresses, scalars
their bytes, and an array the launch line names with `tma.<name>=` its descriptor
(kernels.tma), encoded for the buffer this launch uses and kept by address.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from kplay.kernels import tma
from kplay.kernels.backends.base import KernelError, LaunchSpec

# The descriptors of the buffers seen so far, by (array, address, shape); the harness
# rotates a few buffer sets, so this stays small.
_MAPS_KEPT = 64


class ExLauncher:
    """Launches one loaded CUfunction (its CuPy `Function`) with cluster and tensor maps."""

    def __init__(self, function: Any) -> None:
        self.function = function
        self._maps: dict[tuple[str, int, tuple[int, ...]], bytes] = {}

    def launch(
        self,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        args: list[Any],
        spec: LaunchSpec,
    ) -> None:
        from cuda.bindings import driver

        by_index = {m.index: m for m in spec.tensor_maps}
        try:
            cluster = tma.check_cluster(spec.cluster, grid) if spec.cluster else None
            storage = [self._param(a, by_index.get(i)) for i, a in enumerate(args)]
        except tma.TmaError as exc:
            raise KernelError(str(exc)) from None
        pointers = (ctypes.c_void_p * max(len(storage), 1))(*[ctypes.addressof(s) for s in storage])
        config = driver.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = grid
        config.blockDimX, config.blockDimY, config.blockDimZ = block
        config.sharedMemBytes = int(spec.shared_mem_bytes)
        config.hStream = driver.CUstream(_current_stream())
        if cluster is not None:
            attr = driver.CUlaunchAttribute()
            attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
            config.attrs = [attr]
            config.numAttrs = 1
        else:
            config.numAttrs = 0
        function = driver.CUfunction(_handle(self.function))
        (err,) = driver.cuLaunchKernelEx(config, function, ctypes.addressof(pointers), 0)
        if err != driver.CUresult.CUDA_SUCCESS:
            raise KernelError(_launch_error(err, cluster, spec))

    def _param(self, arg: Any, tmap: tma.TensorMapSpec | None) -> Any:
        cai = getattr(arg, "__cuda_array_interface__", None)
        if cai is not None:
            address = int(cai["data"][0])
            if tmap is None:
                return ctypes.c_uint64(address)
            shape = tuple(int(s) for s in cai["shape"])
            key = (tmap.name, address, shape)
            desc = self._maps.get(key)
            if desc is None:
                desc = tma.encode(tmap, address, shape)
                if len(self._maps) >= _MAPS_KEPT:
                    self._maps.clear()
                self._maps[key] = desc
            return (ctypes.c_char * len(desc)).from_buffer_copy(desc)
        if tmap is not None:
            raise KernelError(f"tma.{tmap.name}: {tmap.name} is not an array")
        raw = np.asarray(arg)
        if raw.ndim != 0:
            raise KernelError(f"cannot pass a host array of shape {raw.shape} to a GPU kernel")
        data = raw.tobytes()
        return (ctypes.c_char * len(data)).from_buffer_copy(data)


def _handle(function: Any) -> int:
    """The CUfunction behind CuPy's kernel object: a `RawKernel` (NVRTC in this process, or
    `RawModule.get_function`) keeps it in `.kernel`; a driver-level `Function` is it."""
    inner = getattr(function, "kernel", function)
    return int(inner.ptr)


def _current_stream() -> int:
    import cupy

    return int(cupy.cuda.get_current_stream().ptr)


def _launch_error(err: Any, cluster: tuple[int, int, int] | None, spec: LaunchSpec) -> str:
    name = getattr(err, "name", str(err))
    text = f"the CUDA driver refused the launch ({name})"
    if cluster is not None:
        blocks = cluster[0] * cluster[1] * cluster[2]
        text += (
            f"; a cluster of {blocks} blocks, each with {spec.shared_mem_bytes} bytes of "
            "dynamic shared memory, must fit on one GPC at once (and clusters of more than 8 "
            "blocks are not portable)"
        )
    return text
