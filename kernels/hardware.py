"""What this host has: its CPU, its NVIDIA GPUs, and where the engine caches what it learns.

Every other module asks here: nothing else in the project reads /proc/cpuinfo or asks the
driver what the host has.

- The CPU comes from /proc/cpuinfo, read once per process; its caches through cpucaches.
- GPUs come through one binding, `cuda-bindings`: its driver module (`cuda.bindings.driver`)
  for what the driver knows without a context (name, compute capability, SMs, memory, PCI
  bus id, UUID, the CUDA version it supports), and its NVML module (`cuda.bindings.nvml`)
  for what only NVML knows: the NVIDIA driver's version, temperature, power and clocks.
  The driver API cannot read current clocks, so every clock here, current or maximum, is
  NVML's; without NVML the clocks are None rather than mixed from two sources.
- Without `cuda-bindings`, without a driver, or with `KPLAY_FORCE_NO_GPU` set, the host simply
  has no GPU, and `prepare_cpu_fallbacks()` switches Numba's CUDA simulator and Triton's
  interpreter on (they must be chosen before those libraries are imported, which is why
  the engine asks the driver directly rather than through them).

Nothing here creates a CUDA context (`cuInit` only), so a process may look and then fork.
Answers are cached for the life of the process; `forget()` drops them (tests).
"""

from __future__ import annotations

import importlib
import os
import platform
import socket
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ConfigDict

from kplay.config import EngineSettings
from kplay.kernels.cpucaches import CacheFacts, detect_caches
from kplay.kernels.models import ClockReading

CPUINFO = Path("/proc/cpuinfo")


class _Facts(BaseModel):
    model_config = ConfigDict(frozen=True)


class CpuFacts(_Facts):
    model: str  # "AMD EPYC 7B13"; the platform's processor name where cpuinfo has none
    architecture: str  # "x86_64", "aarch64"
    logical_cores: int | None  # os.cpu_count(): hardware threads
    physical_cores: int | None = None  # distinct (socket, core) pairs, where cpuinfo says
    sockets: int | None = None
    features: tuple[str, ...] = ()  # the flags (x86) or Features (Arm) of the first CPU
    caches: tuple[CacheFacts, ...] = ()  # data and unified caches, smallest level first

    def has(self, feature: str) -> bool:
        return feature in self.features


class GpuFacts(_Facts):
    ordinal: int  # the driver's number for it in this process (after CUDA_VISIBLE_DEVICES)
    index: int  # nvidia-smi's number: what CUDA_VISIBLE_DEVICES takes in PCI_BUS_ID order
    name: str  # "NVIDIA H200"
    compute_capability: str  # "9.0"
    sm_count: int
    memory_bytes: int  # what CUDA can use (nvidia-smi's total also counts reserved memory)
    pci_bus_id: str | None = None
    uuid: str | None = None  # "GPU-8c7f...", as nvidia-smi writes it
    max_sm_clock_mhz: int | None = None  # NVML
    max_mem_clock_mhz: int | None = None  # NVML

    @property
    def memory_mib(self) -> int:
        return self.memory_bytes // 2**20


class HostFacts(_Facts):
    hostname: str
    cpu: CpuFacts
    gpus: tuple[GpuFacts, ...] = ()
    driver_version: str | None = None  # NVIDIA's, "580.159.04" (NVML)
    cuda_driver_version: str | None = None  # the newest CUDA the driver runs, "13.0"
    no_gpu_reason: str | None = None  # why `gpus` is empty
    profiler: bool = False  # Nsight Compute (ncu) is installed: GPU workers take profiles
    cache_dir: Path  # calibrated ceilings and compile caches (KPLAY_CACHE_DIR)


# ---------------------------------------------------------------- the CPU


def parse_cpuinfo(
    text: str, *, architecture: str = "", logical_cores: int | None = None, model: str = "CPU"
) -> CpuFacts:
    """CpuFacts from the text of /proc/cpuinfo; `model` where the text names none.

    Arm kernels write no model name and no core ids; what the text leaves out stays None.
    """
    records = [_fields(b) for b in text.split("\n\n") if b.strip()]
    first = next((r for r in records if "processor" in r), records[0] if records else {})
    flags = first.get("flags") or first.get("features") or ""
    sockets = {r["physical id"] for r in records if "physical id" in r}
    cores = {(r.get("physical id"), r["core id"]) for r in records if "core id" in r}
    return CpuFacts(
        model=first.get("model name") or model,
        architecture=architecture,
        logical_cores=logical_cores,
        physical_cores=len(cores) or None,
        sockets=len(sockets) or None,
        features=tuple(flags.split()),
    )


def _fields(block: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in block.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out.setdefault(key.strip().lower(), value.strip())
    return out


@lru_cache(maxsize=1)
def cpu() -> CpuFacts:
    try:
        text = CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    return parse_cpuinfo(
        text,
        architecture=platform.machine(),
        logical_cores=os.cpu_count(),
        model=platform.processor() or platform.machine() or "CPU",
    ).model_copy(update={"caches": detect_caches(text)})


# ---------------------------------------------------------------- the driver


class NoGpu(RuntimeError):
    """Raised when a GPU is asked for on a host (or in a process) that has none."""


def _driver_module() -> ModuleType:
    return importlib.import_module("cuda.bindings.driver")


def _ok(answer: Any) -> Any:
    """Unpack a cuda-bindings answer, (CUresult, value...), raising on an error."""
    err, *values = answer if isinstance(answer, tuple) else (answer,)
    if int(err) != 0:
        raise NoGpu(f"the CUDA driver answered {getattr(err, 'name', err)}")
    return values[0] if len(values) == 1 else tuple(values)


@lru_cache(maxsize=1)
def _driver() -> tuple[ModuleType | None, str | None]:
    """The initialised driver module, or None and why not."""
    if EngineSettings().force_no_gpu:
        return None, f"{EngineSettings.env_name('force_no_gpu')} is set"
    try:
        cu = _driver_module()
    except ImportError:
        return None, "cuda-bindings is not installed"
    try:
        _ok(cu.cuInit(0))
    except Exception as exc:  # noqa: BLE001 - no libcuda, no device, a broken driver
        return None, f"no usable CUDA driver ({exc})"
    return cu, None


@lru_cache(maxsize=1)
def gpu_count() -> int:
    """GPUs this process can use: cuInit and a count, nothing more (cheap, cached)."""
    cu, _ = _driver()
    if cu is None:
        return 0
    try:
        return int(_ok(cu.cuDeviceGetCount()))
    except NoGpu:
        return 0


def has_cuda_gpu() -> bool:
    return gpu_count() > 0


def prepare_cpu_fallbacks() -> None:
    """Switch on the simulator and interpreter when there is no GPU.

    Must run before numba.cuda or triton is imported in this process.
    """
    if not has_cuda_gpu():
        os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
        os.environ.setdefault("TRITON_INTERPRET", "1")


def version_text(value: int) -> str:
    """13000 -> '13.0': CUDA's integer versions as people write them."""
    return f"{value // 1000}.{(value % 1000) // 10}"


def _text(raw: Any) -> str:
    if isinstance(raw, bytes):
        raw = raw.split(b"\0", 1)[0].decode(errors="replace")
    return str(raw).strip()


def _uuid_text(raw: bytes) -> str:
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _probe(cu: ModuleType, ordinal: int) -> dict[str, Any]:
    attr = cu.CUdevice_attribute
    dev = _ok(cu.cuDeviceGet(ordinal))

    def get(name: str) -> int:
        return int(_ok(cu.cuDeviceGetAttribute(getattr(attr, f"CU_DEVICE_ATTRIBUTE_{name}"), dev)))

    major, minor = get("COMPUTE_CAPABILITY_MAJOR"), get("COMPUTE_CAPABILITY_MINOR")
    facts: dict[str, Any] = {
        "ordinal": ordinal,
        "name": _text(_ok(cu.cuDeviceGetName(256, dev))),
        "compute_capability": f"{major}.{minor}",
        "sm_count": get("MULTIPROCESSOR_COUNT"),
        "memory_bytes": int(_ok(cu.cuDeviceTotalMem(dev))),
    }
    try:
        facts["pci_bus_id"] = _text(_ok(cu.cuDeviceGetPCIBusId(32, dev))).lower()
        facts["uuid"] = _uuid_text(bytes(_ok(cu.cuDeviceGetUuid(dev)).bytes))
    except Exception:  # noqa: BLE001 - informative; the device is usable without them
        pass
    return facts


# ---------------------------------------------------------------- NVML


@lru_cache(maxsize=1)
def _nvml() -> ModuleType | None:
    """cuda-bindings' NVML, initialised once per process; None where it cannot be."""
    if EngineSettings().force_no_gpu:
        return None
    try:
        nvml = importlib.import_module("cuda.bindings.nvml")
        nvml.init_v2()
    except Exception:  # noqa: BLE001 - an older cuda-bindings, no libnvidia-ml, no driver
        return None
    return nvml


# NVML's C enum values (nvmlClockType_t, nvmlTemperatureSensors_t): stable, whereas the
# names of cuda-bindings' Python enums changed between its releases.
_CLOCK_SM, _CLOCK_MEM, _TEMPERATURE_GPU = 1, 2, 0


def _ask(call: Any, *args: Any) -> Any:
    """One NVML reading, None where this driver or device does not give it."""
    try:
        return call(*args)
    except Exception:  # noqa: BLE001 - readings are informative and vary by driver
        return None


def _nvml_facts(nvml: ModuleType, pci_bus_id: str) -> dict[str, Any]:
    handle = nvml.device_get_handle_by_pci_bus_id_v2(pci_bus_id)
    return {
        "index": int(nvml.device_get_index(handle)),
        "max_sm_clock_mhz": _ask(nvml.device_get_max_clock_info, handle, _CLOCK_SM),
        "max_mem_clock_mhz": _ask(nvml.device_get_max_clock_info, handle, _CLOCK_MEM),
    }


def read_clocks(index: int) -> ClockReading | None:
    """GPU `index`'s clocks, temperature and power now (NVML); None if unknown.

    `index` is nvidia-smi's number (`GpuFacts.index`), whatever CUDA_VISIBLE_DEVICES says.
    NVML only: a process that must not initialise CUDA (a Celery worker before it forks)
    may call this.
    """
    nvml = _nvml()
    if nvml is None:
        return None
    handle = _ask(nvml.device_get_handle_by_index_v2, index)
    if handle is None:
        return None
    temperature = _ask(nvml.device_get_temperature_v, handle, _TEMPERATURE_GPU)
    milliwatts = _ask(nvml.device_get_power_usage, handle)
    return ClockReading(
        sm_mhz=_ask(nvml.device_get_clock_info, handle, _CLOCK_SM),
        mem_mhz=_ask(nvml.device_get_clock_info, handle, _CLOCK_MEM),
        # Some releases answer with an nvmlTemperature_t, others with the number.
        temperature_c=getattr(temperature, "temperature", temperature),
        power_w=None if milliwatts is None else round(milliwatts / 1000.0, 1),
    )


# ---------------------------------------------------------------- GPUs


@lru_cache(maxsize=1)
def _gpus() -> tuple[tuple[GpuFacts, ...], str | None]:
    cu, why = _driver()
    if cu is None:
        return (), why
    try:
        found = [_probe(cu, i) for i in range(gpu_count())]
    except Exception as exc:  # noqa: BLE001 - a device that cannot be read is no device
        return (), f"the CUDA driver could not describe its devices ({exc})"
    if not found:
        return (), "the CUDA driver reports no device"
    # nvidia-smi numbers GPUs in PCI bus order over all of them; NVML knows that number.
    # Without NVML, the PCI bus order of the GPUs this process sees (right unless
    # CUDA_VISIBLE_DEVICES hides some).
    by_bus = sorted(found, key=lambda f: (f.get("pci_bus_id") or "", f["ordinal"]))
    nvml = _nvml()
    for rank, facts in enumerate(by_bus):
        facts["index"] = rank
        if nvml is not None and facts.get("pci_bus_id"):
            try:
                facts.update(_nvml_facts(nvml, facts["pci_bus_id"]))
            except Exception:  # noqa: BLE001 - NVML may refuse one device
                pass
    return tuple(GpuFacts(**f) for f in sorted(by_bus, key=lambda f: f["index"])), None


def gpus() -> tuple[GpuFacts, ...]:
    """Every GPU this process can use, in nvidia-smi's order (cached)."""
    return _gpus()[0]


def current_gpu() -> GpuFacts:
    """The GPU of the calling thread's current CUDA context, else the driver's first.

    Raises NoGpu when this process has none.
    """
    found = gpus()
    if not found:
        raise NoGpu(_gpus()[1] or "no GPU")
    cu, _ = _driver()
    ordinal = 0
    try:
        ordinal = int(_ok(cu.cuCtxGetDevice()))  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - no current context: the first device
        pass
    return next((g for g in found if g.ordinal == ordinal), found[0])


def device_name() -> str:
    """What this process runs kernels on, in a word: its current GPU's name, else the CPU's."""
    try:
        return current_gpu().name
    except NoGpu:
        return cpu().model


@lru_cache(maxsize=1)
def _driver_versions() -> tuple[str | None, str | None]:
    cu, _ = _driver()
    cuda = None
    if cu is not None:
        try:
            cuda = version_text(int(_ok(cu.cuDriverGetVersion())))
        except Exception:  # noqa: BLE001
            cuda = None
    nvml = _nvml() if cu is not None else None
    driver = None
    if nvml is not None:
        try:
            driver = _text(nvml.system_get_driver_version())
        except Exception:  # noqa: BLE001
            driver = None
    return driver, cuda


# ---------------------------------------------------------------- the whole host


def host() -> HostFacts:
    """Everything above in one model (detection cached; the cache folder read now, since
    `kplay worker` sets it before it calibrates)."""
    from kplay.kernels.backends.toolkit_find import find_tool  # backends import this module

    found, why = _gpus()
    driver, cuda = _driver_versions()
    return HostFacts(
        hostname=socket.gethostname(),
        cpu=cpu(),
        gpus=found,
        driver_version=driver,
        cuda_driver_version=cuda,
        no_gpu_reason=why,
        profiler=bool(found) and find_tool("ncu") is not None,
        cache_dir=EngineSettings().cache_root(),
    )


def forget() -> None:
    """Drop every cached answer, so that the next question detects again (tests)."""
    for cached in (cpu, _driver, gpu_count, _nvml, _gpus, _driver_versions):
        cached.cache_clear()
