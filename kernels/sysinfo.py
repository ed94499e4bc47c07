"""What a run ran on: device, driver, CUDA and library versions."""

from __future__ import annotations

import os
import platform
import socket
from functools import lru_cache
from importlib import metadata

from kplay.kernels.backends.base import Backend, Capability
from kplay.kernels.models import SystemInfo

_LIBS = ("numpy", "numba", "numba-cuda", "triton", "torch", "cupy-cuda13x", "cupy-cuda12x")


@lru_cache(maxsize=1)
def library_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _LIBS:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


@lru_cache(maxsize=1)
def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@lru_cache(maxsize=1)
def gpu_facts() -> dict[str, str]:
    """Name, compute capability, driver and runtime versions of the current GPU (CuPy)."""
    import cupy

    dev = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])

    def ver(v: int) -> str:
        return f"{v // 1000}.{(v % 1000) // 10}"

    return {
        "device": name,
        "compute_capability": f"{props['major']}.{props['minor']}",
        "driver": ver(cupy.cuda.runtime.driverGetVersion()),
        "cuda": ver(cupy.cuda.runtime.runtimeGetVersion()),
        "sm_count": str(props["multiProcessorCount"]),
    }


def gpu_name() -> str:
    return gpu_facts()["device"]


def system_info(backend: Backend, capability: Capability, seed: int) -> SystemInfo:
    libs = {**library_versions(), **backend.versions()}
    common = dict(host=socket.gethostname(), cpu_count=os.cpu_count(), libraries=libs, seed=seed)
    if capability is Capability.run and backend.key != "numba-cpu":
        facts = gpu_facts()
        return SystemInfo(
            kind="gpu",
            device=facts["device"],
            compute_capability=facts["compute_capability"],
            driver=facts["driver"],
            cuda=facts["cuda"],
            **common,  # type: ignore[arg-type]
        )
    if capability is Capability.simulate:
        return SystemInfo(kind="simulator", device=f"{cpu_name()} (simulated GPU)", **common)  # type: ignore[arg-type]
    if capability is Capability.compile_only:
        return SystemInfo(kind="compile-only", device="no GPU (compile only)", **common)  # type: ignore[arg-type]
    return SystemInfo(kind="cpu", device=cpu_name(), **common)  # type: ignore[arg-type]
