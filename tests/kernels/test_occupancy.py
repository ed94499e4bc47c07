"""Theoretical occupancy, against the arithmetic of CUDA's occupancy calculator."""

from __future__ import annotations

import pytest

from kplay.kernels.occupancy import occupancy, sm_limits


def test_a_small_kernel_fills_a_hopper_sm_with_warps() -> None:
    occ = occupancy(256, 32, 0, "sm_90a")
    assert occ is not None
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.limiter) == (8, 64, "warps")
    assert occ.percent == 100.0
    assert occ.by_registers == 8 and occ.by_shared is None


def test_a_producer_consumer_kernel_is_held_by_its_registers() -> None:
    # 232 registers x 32 threads = 7424 per warp; 65536 // 7424 = 8 warps: one block of 8.
    occ = occupancy(256, 232, 0, "sm_90a")
    assert occ is not None
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.limiter) == (1, 8, "registers")
    assert occ.percent == 12.5


def test_registers_are_given_in_units_of_256_per_warp() -> None:
    # 33 registers: 1056 per warp rounds up to 1280; 65536 // 1280 = 51 warps -> 6 blocks of 8.
    occ = occupancy(256, 33, 0, "sm_90")
    assert occ is not None and occ.by_registers == 6 and occ.limiter == "registers"


def test_shared_memory_counts_the_per_block_reserve() -> None:
    # 48 KiB + 1 KiB reserved = 50176 bytes; 233472 // 50176 = 4 blocks of 4 warps.
    occ = occupancy(128, 16, 48 * 1024, "sm_90")
    assert occ is not None
    assert (occ.blocks_per_sm, occ.limiter, occ.by_shared) == (4, "shared memory", 4)
    assert occ.percent == 25.0


def test_tiny_blocks_run_into_the_block_limit() -> None:
    occ = occupancy(32, 16, 0, "sm_90")
    assert occ is not None and occ.limiter == "blocks" and occ.blocks_per_sm == 32
    assert occ.percent == 50.0


def test_an_ampere_consumer_sm_holds_fewer_warps() -> None:
    occ = occupancy(1024, 32, 0, "sm_86")
    assert occ is not None
    assert (occ.blocks_per_sm, occ.max_warps_per_sm) == (1, 48)
    assert occ.percent == pytest.approx(66.67, abs=0.01)


@pytest.mark.parametrize(
    ("arch", "warps"), [("sm_90a", 64), ("9.0", 64), ("sm_89", 48), ("sm_87", 48), ("sm_80", 64)]
)
def test_arch_spellings(arch: str, warps: int) -> None:
    sm = sm_limits(arch)
    assert sm is not None and sm.warps == warps


def test_what_cannot_be_answered_is_none() -> None:
    assert sm_limits("sm_50") is None  # older than the table
    assert sm_limits(None) is None
    assert occupancy(256, 32, 0, None) is None
    assert occupancy(0, 32, 0, "sm_90") is None
    assert occupancy(256, 300, 0, "sm_90") is None  # more registers than a thread may have
