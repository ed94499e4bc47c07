"""The run card reads the roofline stage honestly."""

from __future__ import annotations


def test_a_run_above_the_memory_roof_is_explained() -> None:
    from kplay.app.services.cards import _bound_note
    from kplay.kernels.models import RooflineStage

    common = dict(
        flops=1.0,
        bytes=12.0,
        intensity_flops_per_byte=1 / 12,
        achieved_flops_per_s=1.0,
        achieved_bytes_per_s=1.0,
        memory_ceiling_bytes_per_s=1.0,
        compute_ceiling_flops_per_s=1.0,
        compute_ceiling_name="FP32",
        ridge_flops_per_byte=1.0,
        attainable_flops_per_s=1.0,
        ceilings_source="calibrated",
        device="cpu",
    )
    above = RooflineStage(bound="memory", percent_of_roofline=254.0, **common)
    under = RooflineStage(bound="memory", percent_of_roofline=80.0, **common)
    assert "cache" in _bound_note(above)
    assert _bound_note(under) == "memory-bound"
