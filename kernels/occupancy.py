"""Theoretical occupancy: how many blocks of a kernel fit on one SM at once, and what stops more.

The same arithmetic as CUDA's occupancy calculator, from the numbers the resource report
gives (registers per thread, static shared memory) and the launch (threads per block,
dynamic shared memory), for the SM of each compute capability. "Theoretical", because a
real SM may hold fewer blocks: too few blocks in the grid, or a tail of the last wave.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class SmLimits:
    warps: int  # resident warps per SM
    blocks: int  # resident blocks per SM
    shared_bytes: int  # shared memory per SM that blocks can use
    registers: int = 65536  # 32-bit registers per SM
    reserved_shared_bytes: int = 1024  # what the system keeps per block (sm_80 on)
    register_unit: int = 256  # registers are given to a warp in units of this many
    shared_unit: int = 128
    max_registers_per_thread: int = 255


# Per compute capability; the shared memory is the most a block may opt in to plus the
# per-block reserve, as the CUDA programming guide's tables give it.
_SM: dict[int, SmLimits] = {
    70: SmLimits(warps=64, blocks=32, shared_bytes=96 * 1024, reserved_shared_bytes=0),
    75: SmLimits(warps=32, blocks=16, shared_bytes=64 * 1024, reserved_shared_bytes=0),
    80: SmLimits(warps=64, blocks=32, shared_bytes=164 * 1024),
    86: SmLimits(warps=48, blocks=16, shared_bytes=100 * 1024),
    87: SmLimits(warps=48, blocks=16, shared_bytes=164 * 1024),
    89: SmLimits(warps=48, blocks=24, shared_bytes=100 * 1024),
    90: SmLimits(warps=64, blocks=32, shared_bytes=228 * 1024),
    100: SmLimits(warps=64, blocks=32, shared_bytes=228 * 1024),
    103: SmLimits(warps=64, blocks=32, shared_bytes=228 * 1024),
    120: SmLimits(warps=48, blocks=32, shared_bytes=100 * 1024),
}


def sm_limits(arch: str | None) -> SmLimits | None:
    """The SM of 'sm_90a', 'sm_86', '9.0'...; the nearest older one for an unlisted number."""
    m = re.search(r"(\d+)", (arch or "").replace(".", ""))
    if m is None:
        return None
    number = int(m[1])
    known = [cc for cc in _SM if cc <= number and cc // 10 == number // 10]
    return _SM[max(known)] if known else None


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    warps_per_sm: int
    max_warps_per_sm: int
    limiter: str  # "warps", "blocks", "registers" or "shared memory"
    # Blocks per SM each resource alone would allow (None: that resource sets no limit).
    by_warps: int
    by_blocks: int
    by_registers: int | None
    by_shared: int | None

    @property
    def percent(self) -> float:
        return 100.0 * self.warps_per_sm / self.max_warps_per_sm


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def occupancy(
    threads_per_block: int,
    registers_per_thread: int | None,
    shared_bytes_per_block: int,
    arch: str | None,
) -> Occupancy | None:
    """Blocks and warps per SM; None where the arch is unknown or the block cannot launch."""
    sm = sm_limits(arch)
    if sm is None or threads_per_block < 1:
        return None
    warps = math.ceil(threads_per_block / 32)
    by_warps = sm.warps // warps
    by_registers = None
    if registers_per_thread:
        if registers_per_thread > sm.max_registers_per_thread:
            return None
        per_warp = _round_up(registers_per_thread * 32, sm.register_unit)
        by_registers = (sm.registers // per_warp) // warps
    by_shared = None
    if shared_bytes_per_block > 0:
        per_block = _round_up(shared_bytes_per_block + sm.reserved_shared_bytes, sm.shared_unit)
        by_shared = sm.shared_bytes // per_block
    limits = {"warps": by_warps, "blocks": sm.blocks}
    if by_registers is not None:
        limits["registers"] = by_registers
    if by_shared is not None:
        limits["shared memory"] = by_shared
    limiter = min(limits, key=lambda k: limits[k])
    blocks = limits[limiter]
    return Occupancy(
        blocks_per_sm=blocks,
        warps_per_sm=blocks * warps,
        max_warps_per_sm=sm.warps,
        limiter=limiter,
        by_warps=by_warps,
        by_blocks=sm.blocks,
        by_registers=by_registers,
        by_shared=by_shared,
    )
