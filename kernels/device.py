"""Cheap facts about this machine's CUDA devices, found without importing a GPU library.

Numba's simulator and Triton's interpreter must be switched on before those libraries
are imported, so the engine asks the driver directly whether a GPU exists.
"""

from __future__ import annotations

import ctypes
import os
from functools import lru_cache


@lru_cache(maxsize=1)
def cuda_device_count() -> int:
    from kplay.config import EngineSettings

    if EngineSettings().force_no_gpu:
        return 0
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    if lib.cuInit(0) != 0:
        return 0
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return int(count.value)


def has_cuda_gpu() -> bool:
    return cuda_device_count() > 0


def prepare_cpu_fallbacks() -> None:
    """Switch on the simulator and interpreter when there is no GPU.

    Must run before numba.cuda or triton is imported in this process.
    """
    if not has_cuda_gpu():
        os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
        os.environ.setdefault("TRITON_INTERPRET", "1")
