"""kernels.hardware: /proc/cpuinfo parsing, the no-GPU paths, and (on a GPU host) the facts."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kplay.kernels import cpucaches, hardware, sizing

X86 = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
physical id\t: 0
core id\t\t: 0
flags\t\t: fpu sse sse2 avx avx2 fma avx512f amx_tile

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8480+
physical id\t: 0
core id\t\t: 0
flags\t\t: fpu sse sse2 avx avx2 fma avx512f amx_tile

processor\t: 2
model name\t: Intel(R) Xeon(R) Platinum 8480+
physical id\t: 1
core id\t\t: 0
flags\t\t: fpu sse sse2 avx avx2 fma avx512f amx_tile

"""

ARM = """processor\t: 0
BogoMIPS\t: 2000.00
Features\t: fp asimd evtstrm aes sve
CPU implementer\t: 0x41

processor\t: 1
BogoMIPS\t: 2000.00
Features\t: fp asimd evtstrm aes sve
CPU implementer\t: 0x41

Hardware\t: some board
"""


@pytest.fixture
def fresh() -> Iterator[None]:
    """Detection again from scratch, and once more afterwards for the tests that follow."""
    hardware.forget()
    yield
    hardware.forget()


def test_cpuinfo_of_an_x86_host() -> None:
    cpu = hardware.parse_cpuinfo(X86, architecture="x86_64", logical_cores=3)
    assert cpu.model == "Intel(R) Xeon(R) Platinum 8480+"
    # Two hardware threads share core 0 of socket 0; socket 1 has its own core 0.
    assert (cpu.logical_cores, cpu.physical_cores, cpu.sockets) == (3, 2, 2)
    assert cpu.has("avx512f") and cpu.has("amx_tile") and not cpu.has("sve")
    assert cpu.features[:3] == ("fpu", "sse", "sse2")


def test_cpuinfo_of_an_arm_host_names_no_model() -> None:
    cpu = hardware.parse_cpuinfo(ARM, architecture="aarch64", model="aarch64")
    assert cpu.model == "aarch64"
    assert cpu.has("sve") and cpu.has("asimd")
    assert cpu.physical_cores is None and cpu.sockets is None


def test_empty_cpuinfo_keeps_the_fallback_model() -> None:
    cpu = hardware.parse_cpuinfo("", model="CPU")
    assert (cpu.model, cpu.features, cpu.physical_cores) == ("CPU", (), None)


def test_this_host_cpu_is_read_once() -> None:
    first = hardware.cpu()
    assert first is hardware.cpu()
    assert first.model and first.logical_cores == os.cpu_count()


def test_forcing_no_gpu(monkeypatch: pytest.MonkeyPatch, fresh: None) -> None:
    monkeypatch.setenv("KPLAY_FORCE_NO_GPU", "1")
    hardware.forget()
    assert hardware.gpu_count() == 0 and not hardware.has_cuda_gpu()
    host = hardware.host()
    assert host.gpus == () and host.no_gpu_reason == "KPLAY_FORCE_NO_GPU is set"
    assert host.driver_version is None and host.cuda_driver_version is None
    assert hardware.read_clocks(0) is None
    with pytest.raises(hardware.NoGpu, match="KPLAY_FORCE_NO_GPU"):
        hardware.current_gpu()


def test_without_cuda_bindings_there_is_no_gpu(
    monkeypatch: pytest.MonkeyPatch, fresh: None
) -> None:
    monkeypatch.delenv("KPLAY_FORCE_NO_GPU", raising=False)
    # None in sys.modules makes the import fail as if the package were not installed.
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", None)
    monkeypatch.setitem(sys.modules, "cuda.bindings.nvml", None)
    hardware.forget()
    assert hardware.gpu_count() == 0
    host = hardware.host()
    assert host.gpus == () and host.no_gpu_reason == "cuda-bindings is not installed"
    assert hardware.read_clocks(0) is None


def test_cpu_fallbacks_are_switched_on_without_a_gpu(
    monkeypatch: pytest.MonkeyPatch, fresh: None
) -> None:
    monkeypatch.setenv("KPLAY_FORCE_NO_GPU", "1")
    for name in ("NUMBA_ENABLE_CUDASIM", "TRITON_INTERPRET"):
        # Set, then removed: monkeypatch then restores the original, absent or not, so
        # that the switches do not outlive this test on a GPU host.
        monkeypatch.setenv(name, "0")
        monkeypatch.delenv(name)
    hardware.forget()
    hardware.prepare_cpu_fallbacks()
    assert os.environ["NUMBA_ENABLE_CUDASIM"] == "1"
    assert os.environ["TRITON_INTERPRET"] == "1"


def test_the_cache_folder_follows_the_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KPLAY_CACHE_DIR", str(tmp_path))
    assert hardware.host().cache_dir == tmp_path


def test_cuda_versions_read_as_people_write_them() -> None:
    assert hardware.version_text(13000) == "13.0"
    assert hardware.version_text(12080) == "12.8"


@pytest.mark.skipif(hardware.has_cuda_gpu(), reason="this host has a GPU")
def test_a_host_without_a_driver_reports_no_gpu() -> None:
    host = hardware.host()
    assert host.gpus == () and host.no_gpu_reason
    assert hardware.gpus() == ()


@pytest.mark.gpu
def test_gpu_facts_from_the_driver_and_nvml() -> None:
    host = hardware.host()
    assert host.gpus and host.no_gpu_reason is None
    assert [g.index for g in host.gpus] == sorted(g.index for g in host.gpus)
    gpu = hardware.current_gpu()
    major, _, minor = gpu.compute_capability.partition(".")
    assert int(major) >= 5 and minor.isdigit()
    assert gpu.sm_count > 0 and gpu.memory_mib > 1024
    assert gpu.uuid and gpu.uuid.startswith("GPU-") and len(gpu.uuid) == 40
    assert host.cuda_driver_version and host.cuda_driver_version[0].isdigit()
    if host.driver_version is not None:  # NVML answered: every clock is its
        assert gpu.max_sm_clock_mhz and gpu.max_mem_clock_mhz
        clocks = hardware.read_clocks(gpu.index)
        assert clocks is not None and clocks.sm_mhz and clocks.sm_mhz <= gpu.max_sm_clock_mhz


# ---------------------------------------------------------------- caches


def _cache(root: Path, cpu: int, index: int, level: int, kind: str, size: str, shared: str | None):
    folder = root / f"cpu{cpu}" / "cache" / f"index{index}"
    folder.mkdir(parents=True)
    for name, value in (("level", level), ("type", kind), ("size", size)):
        (folder / name).write_text(f"{value}\n")
    if shared is not None:
        (folder / "shared_cpu_list").write_text(f"{shared}\n")


def test_sysfs_caches_of_a_host_with_two_l3_slices(tmp_path: Path) -> None:
    # Four CPUs; L1 and L2 per CPU, one 32 MiB L3 per pair of CPUs (two core complexes).
    for cpu in range(4):
        _cache(tmp_path, cpu, 0, 1, "Data", "48K", str(cpu))
        _cache(tmp_path, cpu, 1, 1, "Instruction", "32K", str(cpu))
        _cache(tmp_path, cpu, 2, 2, "Unified", "1024K", str(cpu))
        _cache(tmp_path, cpu, 3, 3, "Unified", "32768K", "0-1" if cpu < 2 else "2-3")
    caches = cpucaches.parse_sysfs_caches(tmp_path)
    assert [(c.level, c.kind, c.size_bytes, c.instances) for c in caches] == [
        (1, "Data", 48 * 2**10, 4),
        (2, "Unified", 2**20, 4),
        (3, "Unified", 32 * 2**20, 2),
    ]
    llc = cpucaches.last_level(caches)
    assert llc is not None and llc.level == 3
    assert cpucaches.last_level_bytes(caches) == 64 * 2**20


def test_sysfs_entries_that_cannot_be_read_are_skipped(tmp_path: Path) -> None:
    _cache(tmp_path, 0, 0, 1, "Data", "32K", "0")
    _cache(tmp_path, 0, 1, 2, "Unified", "not a size", "0")
    _cache(tmp_path, 0, 2, 3, "Unified", "16M", None)  # no shared_cpu_list: one per CPU
    _cache(tmp_path, 1, 2, 3, "Unified", "16M", None)
    (tmp_path / "cpu1" / "cache" / "index3").mkdir(parents=True)  # empty entry
    caches = cpucaches.parse_sysfs_caches(tmp_path)
    assert [(c.level, c.instances) for c in caches] == [(1, 1), (3, 2)]
    assert cpucaches.parse_sysfs_caches(tmp_path / "missing") == ()


def test_cache_sizes_as_the_kernel_writes_them() -> None:
    assert cpucaches.parse_size("32K") == 32 * 2**10
    assert cpucaches.parse_size("32768K\n") == 32 * 2**20
    assert cpucaches.parse_size("1M") == 2**20
    assert cpucaches.parse_size("512 KB") == 512 * 2**10
    assert cpucaches.parse_size("4096") == 4096
    with pytest.raises(ValueError):
        cpucaches.parse_size("large")


def test_without_sysfs_sysconf_then_cpuinfo_answer(tmp_path: Path, monkeypatch) -> None:
    sizes = {
        "SC_LEVEL1_DCACHE_SIZE": 32768,
        "SC_LEVEL2_CACHE_SIZE": 0,
        "SC_LEVEL3_CACHE_SIZE": 2**25,
    }
    found = cpucaches.sysconf_caches(sizes.__getitem__, sizes)
    assert [(c.level, c.size_bytes, c.source) for c in found] == [
        (1, 32768, "sysconf"),
        (3, 2**25, "sysconf"),
    ]
    assert cpucaches.sysconf_caches(sizes.__getitem__, {}) == ()
    cpuinfo = "processor\t: 0\ncache size\t: 1024 KB\n\nprocessor\t: 1\ncache size\t: 1024 KB\n"
    assert [(c.size_bytes, c.source) for c in cpucaches.cpuinfo_cache(cpuinfo)] == [
        (2**20, "cpuinfo")
    ]
    assert cpucaches.cpuinfo_cache(X86) == ()
    # No sysfs and no sysconf names: cpuinfo's figure; nothing at all: none, and the assumption.
    monkeypatch.setattr(cpucaches.os, "sysconf_names", {})
    assert cpucaches.detect_caches(cpuinfo, tmp_path)[0].source == "cpuinfo"
    assert cpucaches.detect_caches("", tmp_path) == ()
    bare = hardware.CpuFacts(model="x", architecture="x", logical_cores=1)
    monkeypatch.setattr(hardware, "cpu", lambda: bare)
    assert sizing.host_llc_bytes() == cpucaches.ASSUMED_LLC_BYTES


def test_this_host_reads_its_caches_from_the_cache_folder(
    tmp_path: Path, monkeypatch, fresh: None
) -> None:
    _cache(tmp_path, 0, 0, 3, "Unified", "8M", "0")
    monkeypatch.setattr(cpucaches, "SYS_CPU", tmp_path)
    hardware.forget()
    assert sizing.host_llc_bytes() == 8 * 2**20
