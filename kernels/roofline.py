"""Where a timed run sits on its device's roofline.

Ceilings come from `kplay calibrate` (cached per device) or, failing that, from a
datasheet table of known devices; the result says which.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from kplay.kernels.models import Ceilings, RooflineStage

T = 1e12
# Vendor datasheet figures (dense, no sparsity). Leads only: calibrated values win.
DATASHEET: dict[str, dict[str, float]] = {
    "H200": dict(copy=4.8 * T, fp32=67 * T, fp64=34 * T, fp16=989 * T, bf16=989 * T, tf32=494 * T),
    "H100 80GB HBM3": dict(
        copy=3.35 * T, fp32=67 * T, fp64=34 * T, fp16=989 * T, bf16=989 * T, tf32=494 * T
    ),
    "H100 PCIe": dict(
        copy=2.0 * T, fp32=51 * T, fp64=26 * T, fp16=756 * T, bf16=756 * T, tf32=378 * T
    ),
    "A100-SXM4-80GB": dict(
        copy=2.039 * T, fp32=19.5 * T, fp64=9.7 * T, fp16=312 * T, bf16=312 * T, tf32=156 * T
    ),
    "A100-SXM4-40GB": dict(
        copy=1.555 * T, fp32=19.5 * T, fp64=9.7 * T, fp16=312 * T, bf16=312 * T, tf32=156 * T
    ),
    "L4": dict(copy=0.3 * T, fp32=30.3 * T, fp64=0.49 * T, fp16=121 * T, bf16=121 * T, tf32=60 * T),
    "Tesla T4": dict(copy=0.32 * T, fp32=8.1 * T, fp64=0.25 * T, fp16=65 * T),
    "GeForce RTX 4090": dict(
        copy=1.008 * T, fp32=82.6 * T, fp64=1.3 * T, fp16=165 * T, bf16=165 * T, tf32=82.6 * T
    ),
}
# FP8 tensor cores (e4m3, fp32 accumulate), where the device has them.
FP8_DATASHEET = {"H200": 1979 * T, "H100 80GB HBM3": 1979 * T, "H100 PCIe": 1513 * T}
for _name, _rate in FP8_DATASHEET.items():
    DATASHEET[_name]["fp8"] = _rate

CEILING_FIELDS = {
    "fp32": "fp32_flops_per_s",
    "fp64": "fp64_flops_per_s",
    "fp16_tc": "fp16_tc_flops_per_s",
    "bf16_tc": "bf16_tc_flops_per_s",
    "tf32_tc": "tf32_tc_flops_per_s",
    "fp8_tc": "fp8_tc_flops_per_s",
}
CEILING_LABELS = {
    "fp32": "FP32",
    "fp64": "FP64",
    "fp16_tc": "FP16 tensor",
    "bf16_tc": "BF16 tensor",
    "tf32_tc": "TF32 tensor",
    "fp8_tc": "FP8 tensor",
}


def cache_dir() -> Path:
    from kplay.config import EngineSettings

    return EngineSettings().cache_root()


def _slug(device: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", device).strip("-").lower() or "device"


def ceilings_path(device: str) -> Path:
    return cache_dir() / "ceilings" / f"{_slug(device)}.json"


def save_ceilings(ceilings: Ceilings) -> Path:
    path = ceilings_path(ceilings.device)
    path.parent.mkdir(parents=True, exist_ok=True)
    # A temporary name of this process's own: several processes (a pool's children on first
    # need) may calibrate at once, and the last whole file wins.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(ceilings.model_dump_json(indent=2))
    tmp.replace(path)
    return path


def load_calibrated(device: str) -> Ceilings | None:
    path = ceilings_path(device)
    if not path.is_file():
        return None
    try:
        return Ceilings.model_validate(json.loads(path.read_text()))
    except (ValueError, OSError):
        return None


def datasheet(device: str) -> Ceilings | None:
    name = device.removeprefix("NVIDIA ").strip()
    figures = DATASHEET.get(name)
    if figures is None:
        matches = [k for k in DATASHEET if k in name]
        figures = DATASHEET[max(matches, key=len)] if matches else None
    if figures is None:
        return None
    return Ceilings(
        device=device,
        kind="gpu",
        source="datasheet",
        copy_bytes_per_s=figures["copy"],
        read_bytes_per_s=figures["copy"],
        fp32_flops_per_s=figures.get("fp32"),
        fp64_flops_per_s=figures.get("fp64"),
        fp16_tc_flops_per_s=figures.get("fp16"),
        bf16_tc_flops_per_s=figures.get("bf16"),
        tf32_tc_flops_per_s=figures.get("tf32"),
        fp8_tc_flops_per_s=figures.get("fp8"),
        notes="vendor datasheet figures; run `kplay calibrate` to measure this device",
        memory_level="DRAM",
    )


def ceilings_for(device: str) -> Ceilings | None:
    return load_calibrated(device) or datasheet(device)


def place(
    flops: float,
    nbytes: float,
    median_us: float,
    ceilings: Ceilings,
    compute_ceiling: str = "fp32",
) -> RooflineStage | None:
    memory = ceilings.copy_bytes_per_s
    compute = getattr(ceilings, CEILING_FIELDS[compute_ceiling])
    if not memory or not compute or median_us <= 0 or nbytes <= 0:
        return None
    seconds = median_us * 1e-6
    intensity = flops / nbytes
    attainable = min(compute, memory * intensity)
    bound = "memory" if memory * intensity < compute else "compute"
    achieved_flops = flops / seconds
    achieved_bytes = nbytes / seconds
    # A zero-FLOP kernel (a copy, a transpose) is judged on bytes alone.
    if flops > 0:
        percent = 100.0 * achieved_flops / attainable
    else:
        percent = 100.0 * achieved_bytes / memory
    return RooflineStage(
        flops=flops,
        bytes=nbytes,
        intensity_flops_per_byte=intensity,
        achieved_flops_per_s=achieved_flops,
        achieved_bytes_per_s=achieved_bytes,
        memory_ceiling_bytes_per_s=memory,
        compute_ceiling_flops_per_s=compute,
        compute_ceiling_name=CEILING_LABELS[compute_ceiling],
        ridge_flops_per_byte=compute / memory,
        bound=bound,  # type: ignore[arg-type]
        attainable_flops_per_s=attainable,
        percent_of_roofline=percent,
        ceilings_source=ceilings.source,
        device=ceilings.device,
        memory_level=ceilings.memory_level,
        llc_bytes=_llc_bytes(ceilings),
    )


def _llc_bytes(ceilings: Ceilings) -> int | None:
    """A CPU's last-level cache: as its calibration recorded it, else as this host reads it."""
    if ceilings.kind != "cpu":
        return None
    if ceilings.llc_bytes:
        return ceilings.llc_bytes
    from kplay.kernels.sizing import host_llc_bytes

    return host_llc_bytes()
