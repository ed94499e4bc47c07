"""The CPU's data caches, as the host describes them (read through kernels.hardware).

sysfs first: /sys/devices/system/cpu/cpu*/cache/index*/{level,type,size,shared_cpu_list},
one entry per level with the number of instances of it (the L3 of each core complex is
one). Where sysfs says nothing (some containers, other kernels), the sizes `os.sysconf`
knows (glibc's _SC_LEVEL*_CACHE_SIZE, where Python exposes them), and last the one
`cache size` that x86 kernels write into /proc/cpuinfo.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

SYS_CPU = Path("/sys/devices/system/cpu")


class CacheFacts(BaseModel):
    """One level of the CPU's data caches: the size of one instance and how many there are."""

    model_config = ConfigDict(frozen=True)

    level: int  # 1, 2, 3 (4 on a few parts)
    kind: str  # "Data" or "Unified" (instruction caches are left out)
    size_bytes: int  # one instance
    instances: int = 1  # distinct groups of CPUs sharing one (1 where that is unknown)
    source: str = "sysfs"  # "sysfs", "sysconf" or "cpuinfo"

    @property
    def total_bytes(self) -> int:
        """What every instance of this level holds together."""
        return self.size_bytes * self.instances


def parse_size(text: str) -> int:
    """'32K', '32768K', '1M', '512 KB', '1048576' -> bytes (binary units, as sysfs means them)."""
    value = text.strip().upper().removesuffix("B").strip()
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    if value and value[-1] in units:
        return int(value[:-1].strip()) * units[value[-1]]
    return int(value)


def parse_sysfs_caches(root: Path) -> tuple[CacheFacts, ...]:
    """The data caches that `root` (a /sys/devices/system/cpu) lists, one entry per level.

    Each (level, type) is counted once per distinct `shared_cpu_list`: a 32 MiB L3 shared by
    CPUs 0-7 and another by 8-15 are one level of two instances. Entries that cannot be read
    are skipped; an empty tuple where none can.
    """
    sizes: dict[tuple[int, str], int] = {}
    sharing: dict[tuple[int, str], set[str]] = {}
    for index in sorted(root.glob("cpu[0-9]*/cache/index[0-9]*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text().strip())
            size = parse_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind == "Instruction" or size <= 0:
            continue
        try:
            shared = (index / "shared_cpu_list").read_text().strip()
        except OSError:
            shared = index.parent.parent.name  # unknown: one instance per CPU
        key = (level, kind)
        sizes[key] = max(sizes.get(key, 0), size)
        sharing.setdefault(key, set()).add(shared)
    return tuple(
        CacheFacts(
            level=level,
            kind=kind,
            size_bytes=sizes[(level, kind)],
            instances=len(sharing[(level, kind)]),
        )
        for level, kind in sorted(sizes)
    )


# glibc's names for the data cache sizes, where Python exposes them (0 or -1: unknown).
_SYSCONF_CACHES = (
    (1, "SC_LEVEL1_DCACHE_SIZE"),
    (2, "SC_LEVEL2_CACHE_SIZE"),
    (3, "SC_LEVEL3_CACHE_SIZE"),
    (4, "SC_LEVEL4_CACHE_SIZE"),
)


def sysconf_caches(sysconf: Any = os.sysconf, names: Any = None) -> tuple[CacheFacts, ...]:
    """The cache sizes `os.sysconf` knows (one instance each: it does not say how many)."""
    names = os.sysconf_names if names is None else names
    out = []
    for level, name in _SYSCONF_CACHES:
        if name not in names:
            continue
        try:
            size = int(sysconf(name))
        except (OSError, ValueError):
            continue
        if size > 0:
            kind = "Data" if level == 1 else "Unified"
            out.append(CacheFacts(level=level, kind=kind, size_bytes=size, source="sysconf"))
    return tuple(out)


def cpuinfo_cache(text: str) -> tuple[CacheFacts, ...]:
    """cpuinfo's `cache size` of the first CPU, the last resort. x86 kernels name one cache
    there without its level (Intel's L3, AMD's L2): taken as the last level, one instance."""
    raw = next(
        (
            line.partition(":")[2]
            for line in text.split("\n\n", 1)[0].splitlines()
            if line.partition(":")[0].strip().lower() == "cache size"
        ),
        "",
    ).strip()
    if not raw:
        return ()
    try:
        size = parse_size(raw)
    except ValueError:
        return ()
    return (CacheFacts(level=2, kind="Unified", size_bytes=size, source="cpuinfo"),) if size else ()


def detect_caches(cpuinfo_text: str = "", root: Path | None = None) -> tuple[CacheFacts, ...]:
    """sysfs (`root`, SYS_CPU by default), else os.sysconf, else cpuinfo's cache size; an
    empty tuple where none answers."""
    sysfs = parse_sysfs_caches(SYS_CPU if root is None else root)
    return sysfs or sysconf_caches() or cpuinfo_cache(cpuinfo_text)


# What the engine assumes where no cache size can be read: more than most single sockets
# hold, so that cases sized from it still leave the caches of a typical host.
ASSUMED_LLC_BYTES = 64 * 2**20


def last_level(caches: tuple[CacheFacts, ...]) -> CacheFacts | None:
    """The highest cache level, where any is known."""
    return max(caches, key=lambda c: c.level) if caches else None


def last_level_bytes(caches: tuple[CacheFacts, ...]) -> int:
    """Every instance of the last level together (each core complex's L3 counts): what all
    threads between them can keep cached; ASSUMED_LLC_BYTES where no size is known."""
    llc = last_level(caches)
    return llc.total_bytes if llc else ASSUMED_LLC_BYTES
