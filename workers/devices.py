"""What a worker host has, and which worker processes it should run.

Detection never creates a CUDA context in the calling process: `kplay worker` forks and
supervises the workers, and a context made before that would be unusable in them. The
order is nvidia-smi, then NVML, then the driver API through ctypes (names and compute
capability only).

`plan_workers()` is the pure part: devices in, one pinned worker spec per GPU (plus a CPU
worker) out, testable on any machine.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

# On multi-GPU hosts nothing a job does may switch NVLink multicast on: it needs fabric
# state a pinned single-device worker cannot set up, and it fails in ways that look like
# kernel bugs.
NO_MULTICAST_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
_SMI_FIELDS = "index,name,uuid,compute_cap,driver_version,memory.total"


@dataclass(frozen=True)
class GpuDevice:
    index: int
    name: str
    uuid: str | None = None
    compute_capability: str | None = None
    driver: str | None = None
    memory_mib: int | None = None


@dataclass(frozen=True)
class WorkerSpec:
    """One worker process: its registry id, queues, pinned environment and device facts."""

    name: str
    kind: str  # "gpu" or "cpu"
    queues: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- naming


def device_kind(name: str) -> str:
    """'NVIDIA H200' -> 'h200': the slug of a device model, used in queue names."""
    bare = re.sub(r"^(NVIDIA|Tesla)\s+", "", name.strip(), flags=re.IGNORECASE)
    return re.sub(r"[^a-z0-9]+", "-", bare.lower()).strip("-") or "gpu"


def sm_tag(compute_capability: str) -> str:
    """'9.0' -> 'sm90'."""
    major, _, minor = compute_capability.partition(".")
    return f"sm{int(major)}{int(minor or 0)}"


def gpu_queues(device: GpuDevice) -> tuple[str, ...]:
    queues = ["gpu.any"]
    if device.compute_capability:
        queues.append(f"gpu.{sm_tag(device.compute_capability)}")
    queues.append(f"gpu.{device_kind(device.name)}")
    return tuple(queues)


# ---------------------------------------------------------------- the plan (pure)


def plan_workers(
    gpus: list[GpuDevice],
    *,
    include_cpu: bool,
    host: str,
    only_queues: list[str] | None = None,
    cpu_name: str = "CPU",
    cuda_version: str | None = None,
) -> list[WorkerSpec]:
    """One worker per GPU, pinned with CUDA_VISIBLE_DEVICES, plus one CPU worker.

    With `only_queues`, each worker keeps only those of its queues; a worker left with
    none is not started. Raises ValueError for a queue no planned worker could consume.
    """
    specs = [_gpu_spec(d, host, cuda_version, multi=len(gpus) > 1) for d in gpus]
    if include_cpu:
        specs.append(_cpu_spec(host, cpu_name))
    if only_queues is None:
        return specs
    offered = {q for s in specs for q in s.queues}
    unknown = [q for q in only_queues if q not in offered]
    if unknown:
        raise ValueError(
            f"no worker on this host can consume {', '.join(unknown)}; "
            f"it offers {', '.join(sorted(offered)) or 'nothing'}"
        )
    kept = []
    for spec in specs:
        queues = tuple(q for q in spec.queues if q in only_queues)
        if queues:
            info = {**spec.info, "queues": list(queues)}
            kept.append(WorkerSpec(spec.name, spec.kind, queues, spec.env, info))
    return kept


def _gpu_spec(device: GpuDevice, host: str, cuda_version: str | None, multi: bool) -> WorkerSpec:
    name = f"gpu{device.index}@{host}"
    queues = gpu_queues(device)
    env = {"CUDA_VISIBLE_DEVICES": str(device.index), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    if multi:
        env.update(NO_MULTICAST_ENV)
    info = {
        "id": name,
        "host": host,
        "kind": "gpu",
        "device": device.name,
        "device_kind": device_kind(device.name),
        "gpu_index": device.index,
        "uuid": device.uuid,
        "compute_capability": device.compute_capability,
        "driver": device.driver,
        "cuda": cuda_version,
        "memory_mib": device.memory_mib,
        "queues": list(queues),
    }
    return WorkerSpec(name, "gpu", queues, env, info)


def _cpu_spec(host: str, cpu_name: str) -> WorkerSpec:
    name = f"cpu@{host}"
    # Hidden GPUs keep CPU jobs from touching a device another worker owns.
    env = {"CUDA_VISIBLE_DEVICES": ""}
    info = {"id": name, "host": host, "kind": "cpu", "device": cpu_name, "queues": ["cpu"]}
    return WorkerSpec(name, "cpu", ("cpu",), env, info)


def select_gpus(gpus: list[GpuDevice], wanted: str | None) -> tuple[list[GpuDevice], bool]:
    """Apply `--gpus` ("0,1", "all", "0,cpu"): the GPUs kept and whether a CPU worker runs.

    Without the flag every GPU and the CPU are used; with it, the CPU only when named.
    """
    if wanted is None:
        return gpus, True
    tokens = [t.strip() for t in wanted.split(",") if t.strip()]
    include_cpu = "cpu" in tokens
    ids = [t for t in tokens if t not in ("cpu", "all")]
    if "all" in tokens:
        return gpus, include_cpu
    by_index = {str(d.index): d for d in gpus}
    missing = [i for i in ids if i not in by_index]
    if missing:
        have = ", ".join(by_index) or "none"
        raise ValueError(f"no GPU with id {', '.join(missing)} on this host (ids: {have})")
    return [by_index[i] for i in ids], include_cpu


# ---------------------------------------------------------------- detection


def parse_nvidia_smi(text: str) -> list[GpuDevice]:
    """Rows of `nvidia-smi --query-gpu=<_SMI_FIELDS> --format=csv,noheader,nounits`."""
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 6 or not cells[0].isdigit():
            continue

        def opt(value: str) -> str | None:
            return None if value in ("", "[N/A]", "N/A") else value

        memory = opt(cells[5])
        out.append(
            GpuDevice(
                index=int(cells[0]),
                name=cells[1],
                uuid=opt(cells[2]),
                compute_capability=opt(cells[3]),
                driver=opt(cells[4]),
                memory_mib=int(float(memory)) if memory else None,
            )
        )
    return out


def detect_gpus() -> list[GpuDevice]:
    from kplay.kernels.device import cuda_device_count

    if cuda_device_count() == 0:
        return []
    for probe in (_from_nvidia_smi, _from_nvml, _from_driver):
        try:
            found = probe()
        except Exception:  # noqa: BLE001 - each probe is optional; try the next
            found = []
        if found:
            return found
    return []


def _from_nvidia_smi() -> list[GpuDevice]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    proc = subprocess.run(
        [exe, f"--query-gpu={_SMI_FIELDS}", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    return parse_nvidia_smi(proc.stdout) if proc.returncode == 0 else []


def _from_nvml() -> list[GpuDevice]:
    import pynvml  # type: ignore[import-not-found]

    pynvml.nvmlInit()
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h).total // (1024 * 1024)
            out.append(
                GpuDevice(
                    i,
                    _text(pynvml.nvmlDeviceGetName(h)),
                    _text(pynvml.nvmlDeviceGetUUID(h)),
                    f"{major}.{minor}",
                    driver,
                    int(mem),
                )
            )
        return out
    finally:
        pynvml.nvmlShutdown()


def _from_driver() -> list[GpuDevice]:
    lib = ctypes.CDLL("libcuda.so.1")
    if lib.cuInit(0) != 0:
        return []
    count = ctypes.c_int(0)
    lib.cuDeviceGetCount(ctypes.byref(count))
    out = []
    for i in range(count.value):
        name = ctypes.create_string_buffer(256)
        lib.cuDeviceGetName(name, 256, i)
        major, minor = ctypes.c_int(0), ctypes.c_int(0)
        lib.cuDeviceGetAttribute(ctypes.byref(major), 75, i)  # COMPUTE_CAPABILITY_MAJOR
        lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, i)  # COMPUTE_CAPABILITY_MINOR
        out.append(GpuDevice(i, name.value.decode(), None, f"{major.value}.{minor.value}"))
    return out


def cuda_driver_version() -> str | None:
    """The CUDA version the driver supports, e.g. '13.0' (no context needed)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(version)) != 0:
            return None
    except OSError:
        return None
    return f"{version.value // 1000}.{(version.value % 1000) // 10}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


_nvml_ready: bool | None = None


def gpu_clocks(index: int) -> dict[str, Any]:
    """SM/memory clocks, temperature and power of GPU `index` through NVML; {} if unknown.

    NVML counts devices as nvidia-smi does, whatever CUDA_VISIBLE_DEVICES says.
    """
    global _nvml_ready
    try:
        import pynvml

        if _nvml_ready is None:
            pynvml.nvmlInit()
            _nvml_ready = True
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        return {
            "clocks": {
                "sm_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                "mem_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
                "temperature_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
                "power_w": round(pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0, 1),
            }
        }
    except Exception:  # noqa: BLE001 - NVML is optional and varies by driver
        _nvml_ready = _nvml_ready or False
        return {}


# ---------------------------------------------------------------- ceilings


def load_ceilings(info: dict[str, Any]) -> dict[str, Any] | None:
    """Cached (calibrated) ceilings of this worker's device, else datasheet ones."""
    from kplay.kernels import roofline

    device = info.get("device")
    if not device:
        return None
    found = (
        roofline.ceilings_for(device)
        if info.get("kind") == "gpu"
        else (roofline.load_calibrated(device))
    )
    return None if found is None else found.model_dump(mode="json")


def calibrate_here(kind: str) -> str:
    """Measure this process's device (pinned by CUDA_VISIBLE_DEVICES), cache, return JSON."""
    from kplay.kernels import calibrate, roofline

    measured = calibrate.calibrate_gpu() if kind == "gpu" else calibrate.calibrate_cpu()
    roofline.save_ceilings(measured)
    return measured.model_dump_json()


if __name__ == "__main__":
    # `python -m workers.devices calibrate gpu|cpu`: run by `kplay worker` in a child
    # so that no CUDA context is ever made in the supervising process.
    if len(sys.argv) == 3 and sys.argv[1] == "calibrate" and sys.argv[2] in ("gpu", "cpu"):
        print(calibrate_here(sys.argv[2]))
    else:
        sys.exit("usage: python -m workers.devices calibrate gpu|cpu")
