"""Is a timed result possible on the device it ran on?

A kernel that skips its work, or replays an answer it kept, is timed faster than the
device can do that work. After timing, the work the problem counts (its FLOPs and its
bytes) is divided by the median time and compared with the device's ceilings: the
calibrated ones of the device the run used, or the datasheet's where it has none.

- FLOPs: the rate must not exceed the problem's compute ceiling (FP32 for an FP32 GEMM).
- Bytes: the bytes that cannot have come from a cache must not have moved faster than
  the device's best measured bandwidth (the larger of its copy and read ceilings). The
  caches a run may have been served from: on a GPU the L2 (flushed before every
  repetition, but outputs written into it need not reach memory before the end event);
  on a CPU every data cache of the machine (nothing is flushed there).

"Exceed" leaves room for noise: the allowance is 1 + the calibration's own spread (the
largest relative IQR of its timings, counted up to 1; 0 for datasheet figures, which are
the hardware's peak) + KPLAY_SUSPICIOUS_MARGIN (10% by default). A result beyond it ends
as `suspicious`.
"""

from __future__ import annotations

from kplay.kernels import hardware
from kplay.kernels.arrays import ArrayOps
from kplay.kernels.models import Ceilings
from kplay.kernels.roofline import CEILING_FIELDS, CEILING_LABELS

_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def _sig3(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"


def _rate(value: float, unit: str) -> str:
    for scale, prefix in _SI:
        if abs(value) >= scale:
            return f"{_sig3(value / scale)} {prefix}{unit}"
    return f"{_sig3(value)} {unit}"


def _duration(us: float) -> str:
    if us < 1:
        return f"{_sig3(us * 1000)} ns"
    if us < 1000:
        return f"{_sig3(us)} µs"
    if us < 1e6:
        return f"{_sig3(us / 1000)} ms"
    return f"{_sig3(us / 1e6)} s"


def margin() -> float:
    from kplay.config import EngineSettings

    return EngineSettings().suspicious_margin


# A calibration noisier than this says more about the machine's neighbours than about
# what it can do; its spread counts up to here.
MAX_SPREAD = 1.0


def allowance(ceilings: Ceilings, extra: float) -> float:
    """How far above a ceiling a measured rate may land and still count as noise."""
    spread = ceilings.spread if ceilings.source == "calibrated" else 0.0
    return 1.0 + min(MAX_SPREAD, max(0.0, spread or 0.0)) + extra


def too_fast(
    flops: float,
    nbytes: float,
    median_us: float,
    ceilings: Ceilings,
    compute_ceiling: str = "fp32",
    cache_bytes: float = 0.0,
    extra: float = 0.10,
) -> str | None:
    """Why a median time of `median_us` is impossible on this device, or None if it is not."""
    if median_us <= 0:
        return f"timed at {_duration(max(median_us, 0.0))}, which no device can do"
    seconds = median_us * 1e-6
    allowed = allowance(ceilings, extra)
    which = "measured" if ceilings.source == "calibrated" else "datasheet"
    timed = f"timed at {_duration(median_us)}"
    compute = getattr(ceilings, CEILING_FIELDS[compute_ceiling])
    if compute and flops > 0 and flops / seconds > compute * allowed:
        label = CEILING_LABELS[compute_ceiling]
        return (
            f"{timed}, which would need {_rate(flops / seconds, 'FLOP/s')} of {label} "
            f"arithmetic; this device's {which} {label} ceiling is {_rate(compute, 'FLOP/s')}"
        )
    memory = max(ceilings.copy_bytes_per_s or 0.0, ceilings.read_bytes_per_s or 0.0)
    uncached = nbytes - max(0.0, cache_bytes)
    if memory and uncached > 0 and uncached / seconds > memory * allowed:
        moved = _rate(uncached, "B")
        beyond = f" ({moved} more than its caches hold)" if cache_bytes > 0 else ""
        return (
            f"{timed}, which would need {_rate(uncached / seconds, 'B/s')} of memory "
            f"bandwidth to move the case's {_rate(nbytes, 'B')}{beyond}; this device's "
            f"{which} bandwidth ceiling is {_rate(memory, 'B/s')}"
        )
    return None


def cache_bytes(ops: ArrayOps) -> int:
    """What the caches that may have served a run hold: the GPU's L2 or the CPU's caches."""
    if ops.on_gpu:
        import cupy

        return int(cupy.cuda.Device().attributes.get("L2CacheSize", 0))
    return cpu_cache_bytes()


def cpu_cache_bytes() -> int:
    """Every data (or unified) cache of the machine once, as the hardware module reads them;
    1 GiB where none can be read.

    Where the sizes cannot be read, a size larger than any CPU's caches keeps the
    bandwidth test from judging what caches may have served.
    """
    return sum(c.total_bytes for c in hardware.cpu().caches) or 2**30
