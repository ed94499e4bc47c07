"""What a run ran on: the device and host as `kernels.hardware` found them, and versions."""

from __future__ import annotations

import platform
from functools import lru_cache
from importlib import metadata

from kplay.kernels import hardware
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


def gpu_facts() -> dict[str, str]:
    """What a run record quotes about the GPU it ran on (the current one).

    `driver` is NVIDIA's driver version ("580.159.04", empty where NVML cannot say) and
    `cuda` the newest CUDA that driver runs ("13.0"); the CUDA runtime a backend linked is
    among its own versions (`cuda_runtime`).
    """
    gpu, host = hardware.current_gpu(), hardware.host()
    return {
        "device": gpu.name,
        "compute_capability": gpu.compute_capability,
        "driver": host.driver_version or "",
        "cuda": host.cuda_driver_version or "",
        "sm_count": str(gpu.sm_count),
    }


def system_info(backend: Backend, capability: Capability, seed: int | None) -> SystemInfo:
    """`seed`: the public base seed of the run, or None where its seeds were secret."""
    host = hardware.host()
    common = dict(
        host=host.hostname,
        cpu_count=host.cpu.logical_cores,
        libraries={**library_versions(), **backend.versions()},
        seed=seed,
        seeds="secret" if seed is None else "public",
    )
    if capability is Capability.run and backend.key != "numba-cpu":
        gpu = hardware.current_gpu()
        return SystemInfo(
            kind="gpu",
            device=gpu.name,
            compute_capability=gpu.compute_capability,
            driver=host.driver_version,
            cuda=host.cuda_driver_version,
            **common,  # type: ignore[arg-type]
        )
    cpu = host.cpu.model
    if capability is Capability.simulate:
        return SystemInfo(kind="simulator", device=f"{cpu} (simulated GPU)", **common)  # type: ignore[arg-type]
    if capability is Capability.compile_only:
        return SystemInfo(kind="compile-only", device="no GPU (compile only)", **common)  # type: ignore[arg-type]
    return SystemInfo(kind="cpu", device=cpu, **common)  # type: ignore[arg-type]
