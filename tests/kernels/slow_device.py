"""Ceilings of a device far slower than any real one: every honest run on it is too fast."""

from __future__ import annotations

from kplay.kernels.models import Ceilings


def slow_device_ceilings(ops: object = None) -> Ceilings:
    """Stands in for `perf.ceilings_for_run`; the spread is the calibration's own noise."""
    return Ceilings(
        device="a very slow device",
        kind="cpu",
        source="calibrated",
        copy_bytes_per_s=1e6,
        read_bytes_per_s=1e6,
        fp32_flops_per_s=1e3,
        spread=0.05,
    )
